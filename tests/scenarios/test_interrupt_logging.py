"""A Ctrl-C during a py4j call must not print py4j's traceback: the run reports the interrupt in one line."""

import logging

from barriersim.spark.session import _DropPy4jInterruptTraceback


def _record(pathname: str, exc: BaseException | None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(
        "root", logging.ERROR, pathname, 1066, "KeyboardInterrupt while sending command.", None, exc_info
    )


def test_py4j_keyboard_interrupt_record_is_dropped():
    dropper = _DropPy4jInterruptTraceback()
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", KeyboardInterrupt())) is False


def test_other_records_pass():
    dropper = _DropPy4jInterruptTraceback()
    assert dropper.filter(_record("/work/barriersim/run.py", KeyboardInterrupt())) is True
    assert dropper.filter(_record("/work/barriersim/run.py", ConnectionError("gone"))) is True


def test_a_py4j_network_error_on_the_root_logger_goes_to_the_py4j_log_not_the_terminal(monkeypatch):
    """After a Ctrl-C stopped the JVM, py4j logs ``Exception while sending command.`` (``Py4JNetworkError``: the
    answer from the Java side is empty) with a traceback through the root logger: it goes to the py4j logger's
    handler (the run's Python log file while Spark runs) and not to the terminal."""
    kept = []

    class Keep(logging.Handler):
        def emit(self, record):
            kept.append(record)

    py4j = logging.getLogger("py4j")
    monkeypatch.setattr(py4j, "handlers", [Keep()])
    monkeypatch.setattr(py4j, "propagate", False)
    dropper = _DropPy4jInterruptTraceback()
    record = _record("/venv/site-packages/py4j/java_gateway.py", ConnectionError("Answer from Java side is empty"))
    assert dropper.filter(record) is False and kept == [record]
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", None)) is False and len(kept) == 2
    monkeypatch.setattr(py4j, "handlers", [])  # no run's log (Spark stopped): dropped, never on the terminal
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", ConnectionError("gone"))) is False


class _HalfMadeConnection:
    """As py4j's ``ClientServerConnection`` when a Ctrl-C interrupted its ``__init__``: no ``socket`` yet."""

    def close(self):
        return self.socket

    def __del__(self):
        self.close()


_HalfMadeConnection.__del__.__module__ = "py4j.clientserver"


def test_the_finalizer_error_of_a_half_made_py4j_connection_is_not_printed(monkeypatch):
    import sys

    from barriersim.spark import session

    seen = []
    monkeypatch.setattr(session, "_previous_unraisablehook", seen.append)
    monkeypatch.setattr(sys, "unraisablehook", session._drop_py4j_half_made_connection_error)
    _HalfMadeConnection()  # collected at once: its __del__ raises AttributeError
    assert seen == []

    class Other:
        def __del__(self):
            raise AttributeError("socket")

    Other()  # not py4j's: passed on to the previous hook
    assert [type(u.exc_value) for u in seen] == [AttributeError]
