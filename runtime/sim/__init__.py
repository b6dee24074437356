"""The deterministic discrete-event simulator: a virtual clock, one seed, the same runtime/ components as the
Ray actors. ``kernel`` holds the event loop; jobs, network and fault models build on it."""
