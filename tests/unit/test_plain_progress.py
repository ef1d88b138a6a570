"""Progress for a log (no terminal): a line when a step starts and ends, and a heartbeat line per running step."""

import io
import time

from graphrag_ray.exec.progress import PlainProgress


def test_plain_progress_says_start_end_and_keeps_beating_while_a_step_runs():
    out = io.StringIO()
    with PlainProgress(out, every=0.05) as progress:
        task = progress.add_task("extract_graph", total=4, calls=0, cost=0.0, tokens=0)
        progress.update(task, advance=1, calls=3, tokens=1200, cost=0.01)
        time.sleep(0.3)
        progress.update(task, advance=3, calls=9, tokens=4000, cost=0.03)
        time.sleep(0.15)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("extract_graph: started")
    beats = [line for line in lines if "extract_graph: running 1/4, calls 3, tokens 1,200" in line]
    assert len(beats) >= 2, lines
    done = [line for line in lines if "extract_graph: done 4/4, calls 9, tokens 4,000, $0.0300" in line]
    assert len(done) == 1 and lines.index(done[0]) > lines.index(beats[-1])
    assert not any("running" in line for line in lines[lines.index(done[0]) :])  # a finished step stops beating
