"""The task thread's mailbox and timers (``actors.mailbox``): real threads, no Ray."""

import threading

import pytest

from barriersim.actors.clock import now_ms
from barriersim.actors.mailbox import MailboxTimers, TaskMailbox


def test_mails_are_taken_in_the_order_each_thread_put_them():
    mailbox = TaskMailbox()
    start = threading.Barrier(4)

    def put(thread: int) -> None:
        start.wait()
        for i in range(500):
            mailbox.put((thread, i))

    threads = [threading.Thread(target=put, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    taken = mailbox.take(0)
    assert len(taken) == 2000
    for t in range(4):
        assert [i for thread, i in taken if thread == t] == list(range(500))
    assert mailbox.take(0) == []


def test_take_waits_for_a_mail_put_by_another_thread():
    mailbox = TaskMailbox()
    putter = threading.Thread(target=mailbox.put, args=("mail",))
    putter.start()
    taken = []
    while not taken:  # take(None) waits until a mail is there; the loop guards a spurious wake-up
        taken = mailbox.take(None)
    putter.join()
    assert taken == ["mail"]


def test_call_runs_on_the_taking_thread_and_returns_or_raises():
    mailbox = TaskMailbox()
    runs_on: list = []
    answers: list = []

    def caller() -> None:
        answers.append(mailbox.call(lambda: runs_on.append(threading.current_thread()) or 42, 30))
        try:
            mailbox.call(lambda: 1 / 0, 30)
        except ZeroDivisionError as err:
            answers.append(type(err))

    thread = threading.Thread(target=caller)
    thread.start()
    taken = 0
    while taken < 2:
        for mail in mailbox.take(None):
            mail()
            taken += 1
    thread.join()
    assert runs_on == [threading.current_thread()]
    assert answers == [42, ZeroDivisionError]


def test_call_times_out_when_no_thread_takes_the_mail():
    with pytest.raises(TimeoutError):
        TaskMailbox().call(lambda: 1, 0.01)


def test_timers_come_due_in_deadline_order_and_a_cancelled_one_never():
    timers = MailboxTimers()
    fired: list = []
    timers.call_later(0, lambda: fired.append("second"))
    timers.register_timer(now_ms() - 1000, lambda: fired.append("first"))  # in the past: due at once, earliest
    cancelled = timers.call_later(0, lambda: fired.append("cancelled"))
    later = timers.call_later(3600, lambda: fired.append("in an hour"))
    cancelled.cancel()
    for callback in timers.due():
        callback()
    assert fired == ["first", "second"]
    assert 3500 < timers.seconds_to_next() <= 3600
    later.cancel()
    assert timers.seconds_to_next() is None
    assert timers.due() == []
