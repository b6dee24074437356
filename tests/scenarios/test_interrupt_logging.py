"""A Ctrl-C during a py4j call must not print py4j's traceback: the run reports the interrupt in one line."""

import logging

from barriersim.spark.session import _DropPy4jInterruptTraceback


def _record(pathname: str, exc: BaseException | None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord("root", logging.ERROR, pathname, 1066, "KeyboardInterrupt while sending command.",
                             None, exc_info)


def test_py4j_keyboard_interrupt_record_is_dropped():
    dropper = _DropPy4jInterruptTraceback()
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", KeyboardInterrupt())) is False


def test_other_records_pass():
    dropper = _DropPy4jInterruptTraceback()
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", ConnectionError("gone"))) is True
    assert dropper.filter(_record("/work/barriersim/run.py", KeyboardInterrupt())) is True
    assert dropper.filter(_record("/venv/site-packages/py4j/java_gateway.py", None)) is True
