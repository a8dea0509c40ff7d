"""What assembles a run: the server pool that starts or reaches the servers and opens their
backends, for ``lockrace run``, ``bench``, ``rehearse``, isolation specs and the app alike."""
