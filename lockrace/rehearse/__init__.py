"""``lockrace rehearse MIGRATION.sql``: run a migration against live traffic.

Bystander clients run a workload of point reads and updates on a table while a
long transaction holds that table's lock and the migration tries to take its
own; each policy (no lock budget, a budget with retries, the documented
defaults of strong_migrations and pgroll, CONCURRENTLY / ALGORITHM=INSTANT
variants) is rehearsed on a fresh sandbox in the same run and what every
bystander statement waited is measured around the driver call.

Modules: ``policies`` (what a policy is, presets, parsing), ``sqlfile`` (the
migration, setup and workload files, variants), ``connections`` (plain driver
connections in threads), ``workload`` (bystanders and the long transaction),
``migration`` (attempts, budget, retry with backoff and jitter), ``rehearsal``
(one policy on one sandbox), ``stats``, ``report`` (table, chart, verdicts),
``jsonout`` and ``cli``.  Nothing here imports Textual or runs on an event
loop's thread except the orchestration in ``cli``.
"""
