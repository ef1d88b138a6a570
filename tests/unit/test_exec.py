"""The execution package with fake steps, on both backends: outputs, per-step event counts, partition markers and
resume, error unwrapping with cancellation, and actor lifetime."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import polars as pl
import pytest

from graphrag_ray.config.settings import Settings
from graphrag_ray.errors import GraphRagRayError
from graphrag_ray.exec.dispatch import dispatch
from graphrag_ray.exec.executor import Executor
from graphrag_ray.exec.pools import WorkerSpec, open_pool
from graphrag_ray.exec.run_state import RunState
from graphrag_ray.exec.step import BatchStep, ItemStep, StepContext
from graphrag_ray.llm.ratelimit import LocalRateLimiter

NUMBERS = pl.DataFrame({"n": list(range(23))})


class Squares(ItemStep):
    name = "squares"
    reads = ("numbers",)
    writes = ("squares",)
    yields = {"squares": {"n": pl.Int64, "square": pl.Int64}}
    partition_size = 5

    def __init__(self, fail_on: int | None = None, refuse: bool = False):
        self.fail_on = fail_on
        self.refuse = refuse  # a resumed run must not call process at all

    def items(self, ctx, tables, round_index, earlier):
        return [{"item_id": f"{n:03d}", "n": n} for n in tables["numbers"]["n"].to_list()]

    async def process(self, ctx, item, models):
        if self.refuse:
            raise AssertionError(f"item {item['n']} was computed again")
        if item["n"] == self.fail_on:
            raise GraphRagRayError(f"item {item['n']} cannot be done")
        await asyncio.sleep(0.01 if item["n"] != self.fail_on else 0)
        self.stat_update("squared")
        if item["n"] % 2:
            self.stat_update("odd")
        return {"squares": [{"n": item["n"], "square": item["n"] ** 2}]}

    def finish(self, ctx, tables, yielded):
        return {"squares": yielded["squares"].sort("n")}


class Total(BatchStep):
    name = "total"
    reads = ("squares",)
    writes = ("total",)

    def run(self, ctx, tables):
        self.stat_update("rows", tables["squares"].height)
        return {"total": pl.DataFrame({"sum": [tables["squares"]["square"].sum()]})}


def _settings() -> Settings:
    return Settings.model_validate({"workers": {"num_actors": 2, "actor_cpus": 0, "partition_size": 5}})


def _executor(tmp_path, backend: str) -> Executor:
    ctx = StepContext(_settings(), tmp_path)
    return Executor(ctx, RunState(tmp_path / "run"), LocalRateLimiter(), backend=backend)


@pytest.fixture(params=["local", "ray"])
def backend(request):
    if request.param == "ray":
        request.getfixturevalue("ray_session")
    return request.param


def test_steps_run_in_order_with_stats_and_markers(tmp_path, backend):
    executor = _executor(tmp_path, backend)
    tables = executor.run_steps([Squares(), Total()], given={"numbers": NUMBERS})
    assert tables["squares"]["square"].to_list() == [n * n for n in range(23)]
    assert tables["total"]["sum"].item() == sum(n * n for n in range(23))
    assert tables["failures"].height == 0
    stats = executor.stats["squares"]
    assert (stats["items"], stats["partitions"], stats["resumed_partitions"]) == (23, 5, 0)
    assert stats["events"] == {"squared": 23, "odd": 11}
    assert executor.stats["total"]["events"] == {"rows": 23}
    assert sum(executor.node_ids.values()) == 5
    run = RunState(tmp_path / "run")
    assert run.step_done("squares") and run.step_done("total")
    assert run.partition_done("squares", 0, 4, [{"item_id": f"{n:03d}"} for n in range(20, 23)])
    assert not run.partition_done("squares", 0, 4, [{"item_id": "020"}]), "a marker is for exactly its items"


def test_a_resumed_run_reuses_finished_partitions_and_recomputes_none(tmp_path, backend):
    _executor(tmp_path, backend).run_steps([Squares()], given={"numbers": NUMBERS})
    run = RunState(tmp_path / "run")
    run.store.delete("_done/squares.step")  # as if the driver died after the last partition
    resumed = _executor(tmp_path, backend)
    tables = resumed.run_steps([Squares(refuse=True)], given={"numbers": NUMBERS})
    assert tables["squares"]["n"].to_list() == list(range(23))
    assert resumed.stats["squares"]["resumed_partitions"] == 5
    assert resumed.stats["squares"]["events"] == {"squared": 23, "odd": 11}, "counts come back with partitions"
    again = _executor(tmp_path, backend)
    again.run_steps([Squares(refuse=True)], given={"numbers": NUMBERS})
    assert again.stats["squares"]["resumed"] is True


def test_an_error_in_one_item_arrives_as_itself_and_keeps_what_finished(tmp_path, backend):
    executor = _executor(tmp_path, backend)
    with pytest.raises(GraphRagRayError, match="item 22 cannot be done"):  # in the last partition, queued
        executor.run_steps([Squares(fail_on=22)], given={"numbers": NUMBERS})
    assert executor._pool is None, "the pool is closed when the run fails"
    run = RunState(tmp_path / "run")
    assert not run.step_done("squares")
    again = _executor(tmp_path, backend)
    tables = again.run_steps([Squares()], given={"numbers": NUMBERS})
    assert tables["squares"].height == 23
    assert 1 <= again.stats["squares"]["resumed_partitions"] <= 4, "what finished before the error is kept"


class Echo:
    def __init__(self, prefix: str):
        self.prefix = prefix

    async def say(self, text: str) -> str:
        await asyncio.sleep(0.01)
        return self.prefix + text

    async def fail(self, text: str) -> str:
        raise GraphRagRayError(f"cannot say {text}")


def test_a_pool_answers_async_calls_and_a_closed_ray_pool_has_no_actors(backend):
    pool = open_pool(backend, WorkerSpec(Echo, ("> ",)), 2)

    async def main():
        said = await asyncio.gather(*(pool.call("say", str(i)) for i in range(6)))
        with pytest.raises(GraphRagRayError, match="cannot say x"):
            await pool.call("fail", "x")
        return said

    with pool:
        assert asyncio.run(main()) == [f"> {i}" for i in range(6)]
        results = []
        dispatch(pool, list(range(7)), "say", lambda n: (str(n),), lambda n, value: results.append(value))
        assert sorted(results) == sorted(f"> {n}" for n in range(7))
        actors = list(getattr(pool, "actors", []))
    if backend == "ray":
        import ray

        assert len(actors) == 2 and pool.actors == []
        for actor in actors:  # closed: every actor was ended
            with pytest.raises(ray.exceptions.RayActorError):
                ray.get(actor.say.remote("again"), timeout=30)


class Flaky(Squares):
    """Items 5..14 come back as failures (the endpoint gave up on them) until healed."""

    def __init__(self, healed: bool = False):
        super().__init__()
        self.healed = healed

    async def process(self, ctx, item, models):
        if not self.healed and 5 <= item["n"] < 15:
            return {
                "failures": [
                    {
                        "step": self.name,
                        "item_id": item["item_id"],
                        "source": "x",
                        "reason": "gave up after 10 attempts (503)",
                    }
                ]
            }
        return await super().process(ctx, item, models)


def test_a_step_that_mostly_failed_stops_and_a_rerun_retries_only_its_failed_partitions(tmp_path):
    from graphrag_ray.errors import StepFailedError

    ctx = StepContext(_settings(), tmp_path)
    executor = Executor(ctx, RunState(tmp_path / "run"), LocalRateLimiter(), backend="local", max_failure_ratio=0.2)
    with pytest.raises(StepFailedError, match=r"squares: 10 of 23 items failed \(43%.*\(10x\): gave up after 10"):
        executor.run_steps([Flaky()], given={"numbers": NUMBERS})
    run = RunState(tmp_path / "run")
    assert not run.step_done("squares")
    assert run.partition_done("squares", 0, 0, [{"item_id": f"{n:03d}"} for n in range(5)])
    assert not run.partition_done("squares", 0, 1, [{"item_id": f"{n:03d}"} for n in range(5, 10)])
    again = Executor(ctx, RunState(tmp_path / "run"), LocalRateLimiter(), backend="local", max_failure_ratio=0.2)
    tables = again.run_steps([Flaky(healed=True)], given={"numbers": NUMBERS})
    assert tables["squares"].height == 23 and tables["failures"].height == 0
    assert again.stats["squares"]["resumed_partitions"] == 3, "only the two partitions with failures ran again"


class WaitsForSquares(ItemStep):
    """A background step whose items finish only once the step after it has started: run one after the other,
    it would wait out its patience and fail."""

    name = "cubes"
    background = True
    reads = ("numbers",)
    writes = ("cubes",)
    yields = {"cubes": {"n": pl.Int64, "cube": pl.Int64}}
    partition_size = 5

    def __init__(self, flag: str, fail_on: int | None = None):
        self.flag, self.fail_on = flag, fail_on

    def items(self, ctx, tables, round_index, earlier):
        return [{"item_id": f"{n:03d}", "n": n} for n in tables["numbers"]["n"].to_list()]

    async def process(self, ctx, item, models):
        if item["n"] == self.fail_on:
            raise GraphRagRayError(f"cube {item['n']} cannot be done")
        for _ in range(600):
            if Path(self.flag).exists():
                return {"cubes": [{"n": item["n"], "cube": item["n"] ** 3}]}
            await asyncio.sleep(0.05)
        raise GraphRagRayError("the step after a background step did not run beside it")

    def finish(self, ctx, tables, yielded):
        return {"cubes": yielded["cubes"].sort("n")}


class FlagsSquares(Squares):
    def __init__(self, flag: str):
        super().__init__()
        self.flag = flag

    async def process(self, ctx, item, models):
        Path(self.flag).touch()
        return await super().process(ctx, item, models)


class Both(BatchStep):
    name = "both"
    reads = ("squares", "cubes")
    writes = ("both",)

    def run(self, ctx, tables):
        return {"both": tables["squares"].join(tables["cubes"], on="n").sort("n")}


def test_a_background_step_runs_beside_the_next_steps_until_one_reads_its_output(tmp_path, backend):
    flag = str(tmp_path / "squares-started")
    executor = _executor(tmp_path, backend)
    tables = executor.run_steps([WaitsForSquares(flag), FlagsSquares(flag), Both()], given={"numbers": NUMBERS})
    assert tables["both"]["cube"].to_list() == [n**3 for n in range(23)]
    assert tables["both"]["square"].to_list() == [n * n for n in range(23)]
    assert list(executor.stats) == ["cubes", "squares", "both"], "stats in the method's order"
    assert executor.stats["cubes"]["items"] == 23 and executor.stats["squares"]["events"]["squared"] == 23
    run = RunState(tmp_path / "run")
    assert run.step_done("cubes") and run.step_done("both")


def test_a_failing_background_step_stops_the_run_with_its_own_error(tmp_path, backend):
    flag = str(tmp_path / "squares-started")
    executor = _executor(tmp_path, backend)
    with pytest.raises(GraphRagRayError, match="cube 3 cannot be done"):
        executor.run_steps([WaitsForSquares(flag, fail_on=3), FlagsSquares(flag), Both()], given={"numbers": NUMBERS})
    assert executor._pool is None
    assert not RunState(tmp_path / "run").step_done("both")


class NotesWhetherSquaresStarted(BatchStep):
    """A background step's driver work (Leiden, say): it notes whether the step after it had work running."""

    name = "notes"
    background = True
    reads = ("numbers",)
    writes = ("notes",)

    def __init__(self, flag: str):
        self.flag = flag

    def run(self, ctx, tables):
        return {"notes": pl.DataFrame({"squares_started": [Path(self.flag).exists()]})}


class CallingSquares(FlagsSquares):
    uses_llm = True  # its items stand for model calls (no model is named: none is checked)

    def items(self, ctx, tables, round_index, earlier):
        time.sleep(0.5)  # the driver's own work before the first items go out
        return super().items(ctx, tables, round_index, earlier)


class PreparedTotal(Total):
    """A step whose prepare() needs none of its input tables: it runs beside the step before."""

    def __init__(self, flag: str):
        self.flag = flag
        self.seen: list[str] = []

    def prepare(self, ctx):
        time.sleep(0.2)  # it is waited for: the run does not go on without it
        self.seen.append("prepared while squares ran" if Path(self.flag).exists() else "prepared")

    def run(self, ctx, tables):
        self.seen.append("ran")
        return super().run(ctx, tables)


def test_work_beside_a_step_starts_once_that_step_has_work_running(tmp_path):
    """In this process the workers share the GIL with the driver: a background step's driver work, the next step's
    prepare() and slow imports start only once the running step's first items are out (the requests they send are
    on the run's critical path), and a step waits for its prepare()."""
    flag = str(tmp_path / "squares-started")
    executor = _executor(tmp_path, "local")
    imported: list[bool] = []
    executor.beside_first_calls(lambda: imported.append(Path(flag).exists()))
    total = PreparedTotal(flag)
    tables = executor.run_steps(
        [NotesWhetherSquaresStarted(flag), CallingSquares(flag), total], given={"numbers": NUMBERS}
    )
    assert tables["notes"]["squares_started"].to_list() == [True]
    assert total.seen == ["prepared while squares ran", "ran"]
    assert tables["total"]["sum"].to_list() == [sum(n * n for n in range(23))]
    for _ in range(100):
        if imported:
            break
        time.sleep(0.05)
    assert imported == [True], "work waiting for the first model calls ran once they were out"


def test_a_run_joins_only_the_cluster_it_is_told_of_and_never_a_dead_record(tmp_path, monkeypatch, caplog):
    """RAY_ADDRESS (a submitted job, or a cluster named on purpose) or a command's --address is Ray's to use; a
    cluster `ray start` merely recorded on the machine is never joined - not by `serve` either - and the command
    says it did not join it; a record naming a cluster that is gone is never followed."""
    import socket

    from graphrag_ray.exec.runtime import ray_address

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert ray_address(str(tmp_path)) == "local"  # no record: a cluster of its own
    record = tmp_path / "ray_current_cluster"
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead_port = closed.getsockname()[1]
    record.write_text(f"127.0.0.1:{dead_port}")
    assert ray_address(str(tmp_path)) == "local"
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        live = f"127.0.0.1:{head.getsockname()[1]}"
        record.write_text(live)
        with caplog.at_level("WARNING", logger="graphrag_ray.exec.runtime"):
            assert ray_address(str(tmp_path)) == "local"
        assert f"not joining the Ray cluster at {live}" in caplog.text
        assert ray_address(str(tmp_path), address=live) == live  # named on purpose (--address): joined
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{dead_port}")
    assert ray_address(str(tmp_path)) is None  # a submitted job's address is Ray's to use, never overridden


class Summaries(ItemStep):
    """Reads the summaries' prompt in its workers (process) and, when `in_finish`, in the driver (finish)."""

    name = "summaries"
    uses_llm, settings_section = True, "summarize_descriptions"
    reads = ("numbers",)
    writes = ("summaries",)
    yields = {"summaries": {"n": pl.Int64, "prompt_chars": pl.Int64}}

    def __init__(self, declares: bool, in_finish: bool = False):
        self.prompt_keys = ("prompt",) if declares else ()
        self.in_finish = in_finish

    def items(self, ctx, tables, round_index, earlier):
        return [{"item_id": f"{n:03d}", "n": n} for n in tables["numbers"]["n"].to_list()[:3]]

    async def process(self, ctx, item, models):
        read = "" if self.in_finish else ctx.prompt(ctx.settings.summarize_descriptions.prompt)
        return {"summaries": [{"n": item["n"], "prompt_chars": len(read)}]}

    def finish(self, ctx, tables, yielded):
        if self.in_finish:
            ctx.prompt(ctx.settings.summarize_descriptions.prompt)
        return {"summaries": yielded["summaries"].sort("n")}


@pytest.mark.parametrize("in_finish", [False, True], ids=["in-a-worker", "in-the-driver"])
def test_a_step_reading_a_prompt_it_does_not_declare_fails_and_one_it_declares_is_read(tmp_path, backend, in_finish):
    """The index's fingerprint, run id and prompt pre-check are made from what steps declare: a prompt read but
    not declared would let an edited prompt file change nothing (a resumed run would publish the old prompt's
    work, an update would not refuse)."""
    from graphrag_ray.exec.step import UndeclaredPromptError

    with pytest.raises(UndeclaredPromptError, match="step summaries reads prompts/summarize_descriptions.txt"):
        _executor(tmp_path / "undeclared", backend).run_steps(
            [Summaries(declares=False, in_finish=in_finish)], given={"numbers": NUMBERS}
        )
    tables = _executor(tmp_path / "declared", backend).run_steps(
        [Summaries(declares=True, in_finish=in_finish)], given={"numbers": NUMBERS}
    )
    assert tables["summaries"]["n"].to_list() == [0, 1, 2]
    if not in_finish:
        assert tables["summaries"]["prompt_chars"].min() > 100, "the packaged prompt was read"


class FrameSquares(Squares):
    """Squares whose plan gives its items as a frame, in no particular order (exec/items.py)."""

    def items(self, ctx, tables, round_index, earlier):
        n = tables["numbers"]["n"]
        return pl.DataFrame({"item_id": [f"{v:03d}" for v in n.to_list()], "n": n}).reverse()


class WideTotal(Total):
    """Reads one column of a two-column table."""

    reads = ("wide",)
    read_columns = {"wide": ("square",)}

    def run(self, ctx, tables):
        assert tables["wide"].columns == ["square"], tables["wide"].columns
        return {"total": pl.DataFrame({"sum": [tables["wide"]["square"].sum()]})}


def test_items_given_as_a_frame_are_the_same_partitions_as_a_list_and_a_step_gets_only_its_columns(tmp_path, backend):
    """A frame of items is cut into the same partitions as the same items in a list (id order): a run of one
    resumes the other's partitions. A step naming `read_columns` gets only those, held or read back."""
    _executor(tmp_path, backend).run_steps([FrameSquares()], given={"numbers": NUMBERS})
    run = RunState(tmp_path / "run")
    run.store.delete("_done/squares.step")
    resumed = _executor(tmp_path, backend)
    tables = resumed.run_steps([Squares(refuse=True)], given={"numbers": NUMBERS})
    assert resumed.stats["squares"]["resumed_partitions"] == 5
    assert tables["squares"]["square"].to_list() == [n * n for n in range(23)]
    wide = pl.DataFrame({"text": ["x" * 100] * 23, "square": [n * n for n in range(23)]})
    held = _executor(tmp_path / "held", backend).run_steps([WideTotal()], given={"wide": wide})
    assert held["total"]["sum"].item() == sum(n * n for n in range(23))
    RunState(tmp_path / "back").save_tables({"wide": wide})  # written by an earlier step of the run
    back = _executor(tmp_path / "b", backend)
    back.run = RunState(tmp_path / "back")
    assert back.run_steps([WideTotal()])["total"]["sum"].item() == sum(n * n for n in range(23))


class WriteWide(Total):
    """Writes a table with a wide column and a narrow one."""

    name, reads, writes = "write_wide", (), ("wide",)

    def run(self, ctx, tables):
        return {"wide": pl.DataFrame({"text": ["x" * 100] * 23, "square": [n * n for n in range(23)]})}


class TextLength(Total):
    """Reads the whole of a table that a step before it read one column of."""

    name, reads, writes = "length", ("wide",), ("length",)

    def run(self, ctx, tables):
        assert tables["wide"].columns == ["text", "square"], tables["wide"].columns
        return {"length": pl.DataFrame({"chars": [tables["wide"]["text"].str.len_chars().sum()]})}


def test_between_steps_a_large_run_holds_only_the_columns_the_next_step_reads(tmp_path, backend, monkeypatch):
    """With `keep` (a large run), a table is read back after the step that wrote it in the columns the next step
    reads, not whole; a step after that which reads all of it still gets all of it, and a whole table held for one
    step is not held whole for a next step that reads only some of it."""
    reads = []
    load = RunState.load_table
    monkeypatch.setattr(
        RunState,
        "load_table",
        lambda self, name, columns=None: reads.append((name, columns)) or load(self, name, columns),
    )
    for order, expected in (
        ([WriteWide(), WideTotal(), TextLength()], [["square"], None]),  # narrow for the next step, whole later
        ([WriteWide(), TextLength(), WideTotal()], [None, ["square"]]),  # whole, then let go and read narrow
    ):
        reads.clear()
        out = _executor(tmp_path / type(order[1]).__name__, backend).run_steps(order, keep={"total", "length"})
        assert out["total"]["sum"].item() == sum(n * n for n in range(23))
        assert out["length"]["chars"].item() == 2300
        assert [columns for name, columns in reads if name == "wide"] == expected


class ScannedLabels(Total):
    """Scans a table it only passes through, and returns a scan with a column set beside it."""

    reads = ("wide",)
    lazy_reads = ("wide",)
    writes = ("wide",)

    def run(self, ctx, tables):
        assert isinstance(tables["wide"], pl.LazyFrame), type(tables["wide"])  # not held: a scan of the run's file
        squares = tables["wide"].select("square").collect()
        label = squares.select((pl.col("square") % 2 == 0).alias("even"))
        return {"wide": pl.concat([tables["wide"].drop("even", strict=False), label.lazy()], how="horizontal")}


def test_a_step_scans_its_lazy_reads_and_the_lazy_tables_it_returns_are_written(tmp_path, backend):
    """A `lazy_reads` table reaches the step as a scan of the run's file; a
    LazyFrame it returns is collected and written, over the very file it scanned, and a re-run reads it alike."""
    wide = pl.DataFrame({"text": ["x" * 100] * 23, "square": [n * n for n in range(23)]})
    RunState(tmp_path / "back").save_tables({"wide": wide})
    for attempt in range(2):  # the second reads the table the first wrote, with `even` already in it
        executor = _executor(tmp_path / f"e{attempt}", backend)
        executor.run = RunState(tmp_path / "back")
        executor.run.store.delete("_done/total.step")
        out = executor.run_steps([ScannedLabels()], keep={"wide"})
        written = out["wide"]
        assert isinstance(written, pl.DataFrame) and written.columns == ["text", "square", "even"]
        assert written["even"].to_list() == [n % 2 == 0 for n in range(23)]
        assert written["text"].to_list() == wide["text"].to_list()
