"""The errors barriersim raises for bad input, in a module without heavy imports (the simulator's paths import no
Ray backend module). Each message is one line naming the file, key or argument and the problem.
``ScenarioError`` (a scenario file or setting) and ``FaultScheduleError`` (a fault schedule) live beside the code
that checks them; ``barriersim`` exports them all."""


class BarriersimError(Exception):
    """Bad input to barriersim; ``str()`` is the one-line message for the user."""


class UnsupportedScenario(BarriersimError):
    """A valid scenario that this backend cannot run; the message says what and why."""


class ArgumentError(BarriersimError, ValueError):
    """An argument of the API or the command line that has no meaning (e.g. an unknown backend)."""


class RayStartError(BarriersimError):
    """Ray did not start here (e.g. its raylet did not come up within Ray's 30 s on an overloaded machine); ``str()``
    is one line."""


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message (its type's name if it has none): what a one-line report quotes."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
