"""Execution: the only package that knows Ray (besides the rate limiter's actor in llm/ratelimit.py).

runtime.py   joining Ray, choosing a backend (`local` | `ray` | `auto`)
pools.py     worker pools with one interface: objects in this process, or async Ray actors
dispatch.py  the driver's loop over a pool (least-loaded, cancellation on error)
run_state.py work in progress and completion markers, on any Store (what resume reads)
step.py      the step contract (batch and item steps, uses_llm / model_ids, stat_update)
worker.py    the worker that runs item-step partitions
executor.py  runs steps: partitions, markers, progress, per-step stats
Index steps, global search's map calls and bulk evaluation all run through here.
"""
