"""The deterministic discrete-event simulator: a virtual clock, one seed, the same runtime/ components as the
Ray actors. ``kernel`` holds the event loop; ``job_simulation`` runs a whole job on it (the ``runtime.job``
Dispatcher) with its ``data_plane`` (the tasks, their network and cost model); ``consistent_cut`` checks that
every completed checkpoint is a consistent cut."""
