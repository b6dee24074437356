"""What goes wrong and what a user does in a run, the same on both backends: ``fault_schedule`` (the faults and
their protocol points), ``fault_log`` (which of them fired), ``experiment`` (savepoints, stop-with-savepoint,
cancel, restores), ``tagged_tables`` (both schedules as tagged tables and JSON) and ``mutations`` (the historical
bugs tests plant)."""
