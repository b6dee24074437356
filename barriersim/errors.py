"""Exceptions shared by the backends, the API and the command line, in a module without heavy imports, so the
simulator's paths (``barriersim run --backend sim``, ``barriersim replay``) import no Ray backend module.
``barriersim.run`` re-exports ``UnsupportedScenario``."""


class UnsupportedScenario(Exception):
    """A valid scenario that this backend cannot run; the message says what and why."""
