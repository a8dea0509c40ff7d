"""The app on a private MariaDB Galera cluster: panels and timeline lanes name
each session's node, a built-in Galera scenario plays to the end, and the
certification conflict shows as its own badge (real cluster, pilot-driven)."""

from __future__ import annotations

import pytest

from support.app import badge, running_app, until

from lockrace.app.timeline import render_timeline
from lockrace.scenario.library import resolve

# also a galera test: pytest -m galera selects it with tests/drivers/galera
pytestmark = pytest.mark.galera


async def test_free_form_galera_panels_name_their_nodes(galera_cluster):
    async with running_app(engine="galera", targets={"galera": galera_cluster}) as (app, pilot):
        assert "MariaDB Galera" in app.sub_title
        titles = {name: str(panel.border_title).split(" · thread ")[0] for name, panel in app.panels.items()}
        assert all(" · thread " in str(panel.border_title) for panel in app.panels.values())
        assert titles == {"A": "Session A @ node1", "B": "Session B @ node1",
                          "C": "Session C @ node2", "D": "Session D @ node2"}
        assert app.race.placement == {"A": "node1", "B": "node1", "C": "node2", "D": "node2"}
        lanes = render_timeline(app.timeline_model, 150, 0).plain
        assert " A@node1 " in lanes and " D@node2 " in lanes


async def test_certification_conflict_scenario_plays_with_its_badge(galera_cluster):
    scenario = resolve("galera-certification-conflict")
    async with running_app(engine="galera", scenario=scenario, targets={"galera": galera_cluster}) as (app, pilot):
        player = app.player
        commit_at = next(i for i, st in enumerate(scenario.steps, 1) if st.session == "C" and "COMMIT" in st.sql)
        for step in range(1, commit_at + 1):
            await pilot.press("f5")
            await until(pilot, lambda: player.position == step and not player.busy, what=f"step {step}")
        assert badge(app, "C") == "certification conflict"  # its own badge, not "deadlock victim"
        assert app.panels["C"].status.last.conflict in ("certification failure", "brute-force abort")
        await pilot.press("f6")
        await until(pilot, lambda: player.finished, timeout=30, what="scenario end")
        assert [f for r in player.records for f in r.failures] == []
        commit = [r for r in player.records if r.result and r.result.outcome == "certification_conflict"]
        assert [r.step.session for r in commit] == ["C"]
        bars = [b for b in app.timeline_model.bars if b.outcome == "certification_conflict"]
        assert [b.session for b in bars] == ["C"]
