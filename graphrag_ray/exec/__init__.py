"""Execution: the only package that knows Ray (besides the rate limiter's actor in llm/ratelimit.py).

step.py       the step contract: batch and item steps, what a step declares (reads, writes, prompts, publishes,
              models), stat_update
executor.py   runs a method's steps: partitions, markers, background steps, per-step stats
worker.py     the worker that runs item-step partitions (a Ray actor, or an object in this process)
pools.py      worker pools with one interface: objects in this process, or async Ray actors
dispatch.py   the driver's loop over a pool (least-loaded, cancellation on error)
beside.py     driver work started once a step has its first calls in flight (imports, the next step's prepare)
run_state.py  work in progress and completion markers, on any Store (what resume reads)
carried.py    the rows per item an update carries from the version it updates
held.py       which tables the driver holds between steps, in which columns
items.py      a round's work items cut into partitions (dicts, or a polars frame made dicts a partition at a time)
batched.py    a partition in batch mode (`index --batch`): its calls wait for the provider's Batch API jobs
progress.py   the rich progress bars (items, calls, tokens, cost per step)
runtime.py    joining Ray, choosing a backend (`local` | `ray` | `auto`), the job's limiter
Index steps, global search's map calls and bulk evaluation all run through here.
"""
