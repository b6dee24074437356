"""The deterministic discrete-event simulator: a virtual clock, one seed, the same runtime/ components as the
Ray actors. ``kernel`` holds the event loop; ``job_simulation`` runs a whole job on it (``config``, ``data_plane``,
``control_plane``, ``failover``); ``verification`` judges what it committed and ``consistent_cut`` checks that
every completed checkpoint is a consistent cut."""
