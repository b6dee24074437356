"""The sans-IO core of barriersim.

Everything under this package is plain, deterministic Python: components take events and return actions.
No import of ray, pyspark, raydp, asyncio, threading or time; no wall clock; no global random (callers
inject a clock, a timer service and a seeded ``random.Random``). Checkpoint storage is the one part that
touches files.
"""
