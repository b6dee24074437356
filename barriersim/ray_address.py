"""The Ray cluster a run attaches to (``--address`` or ``RAY_ADDRESS``), checked before anything starts.

How this works: ``check_address`` resolves the head's host and connects to its GCS port, and checks that a gRPC
server answers there (the HTTP/2 preface is answered by a SETTINGS frame), all within ``connect_timeout`` seconds
(``--connect-timeout``, else ``$BARRIERSIM_CONNECT_TIMEOUT``, else 30), before ``ray.init`` is called: an address
that cannot be reached costs one line (``AddressError``) instead of Ray's retries. ``auto`` is resolved as Ray
resolves it. A ``ray://`` (Ray Client) address is refused: the run's Spark on Ray (RayDP in fault-tolerant mode)
does not run over Ray Client, so the driver must join the cluster at its GCS address.
"""

from __future__ import annotations

import argparse
import os
import socket
import threading
import time

from barriersim.errors import BarriersimError, first_line

DEFAULT_CONNECT_TIMEOUT_S = 30.0
TIMEOUT_VARIABLE = "BARRIERSIM_CONNECT_TIMEOUT"
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_EMPTY_SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_SETTINGS = 0x04


class AddressError(BarriersimError):
    """A Ray address that cannot be attached to; ``str()`` is the one-line message."""


def connect_timeout(seconds: float | None = None) -> float:
    """The timeout given, else ``$BARRIERSIM_CONNECT_TIMEOUT``, else 30 s."""
    if seconds is None:
        text = os.environ.get(TIMEOUT_VARIABLE, "").strip()
        if not text:
            return DEFAULT_CONNECT_TIMEOUT_S
        try:
            seconds = float(text)
        except ValueError:
            raise AddressError(f"{TIMEOUT_VARIABLE}: must be a number of seconds > 0, got {text!r}") from None
        origin = TIMEOUT_VARIABLE
    else:
        origin = "connect_timeout"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise AddressError(f"{origin}: must be a number of seconds > 0, got {seconds!r}")
    return float(seconds)


def timeout_argument(text: str) -> float:
    """``--connect-timeout``: seconds > 0 (an ``argparse`` type: its ``ValueError`` is argparse's one line)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def given_address(address: str | None) -> tuple[str | None, str]:
    """The address to attach to and where it came from: ``address``, else ``RAY_ADDRESS``, else None."""
    if address:
        return address.strip(), "--address"
    env = os.environ.get("RAY_ADDRESS", "").strip()
    return (env, "RAY_ADDRESS") if env else (None, "--address")


def check_address(address: str | None, timeout: float | None = None) -> str | None:
    """Check the cluster at ``address`` (or ``RAY_ADDRESS``) answers within ``timeout`` seconds; returns the
    address for ``ray.init`` (None: start a local cluster) or raises ``AddressError``."""
    timeout = connect_timeout(timeout)
    addr, origin = given_address(address)
    if addr is None or addr == "local":
        return addr
    where = f"{origin} {addr}"
    if addr.startswith("ray://"):
        raise AddressError(
            f"{where}: a Ray Client address; the run's Spark on Ray (RayDP, fault-tolerant mode) "
            "does not run over Ray Client: give the head's GCS address HOST:PORT (port 6379 by "
            "default), from a machine that can join the cluster"
        )
    if "://" in addr:
        raise AddressError(f"{where}: must be the Ray head's GCS address HOST:PORT (port 6379 by default)")
    target = _resolve_auto(where) if addr == "auto" else addr
    host, port = _host_and_port(where, target)
    deadline = time.monotonic() + timeout
    infos = _resolve(where, host, port, timeout)
    _probe(where, infos, host, port, deadline, timeout)
    return addr


def _resolve_auto(where: str) -> str:
    """``auto``: the cluster Ray would find (the latest ``ray start`` on this machine)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address_or_die

        return canonicalize_bootstrap_address_or_die("auto")
    except Exception as err:  # noqa: BLE001 - Ray's ConnectionError and whatever its look-up raises
        raise AddressError(f"{where}: no running Ray cluster found on this machine ({first_line(err)})") from None


def _host_and_port(where: str, addr: str) -> tuple[str, int]:
    host, sep, port_text = addr.rpartition(":")
    host = host.strip("[]")  # [::1]:6379
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    if not sep or not host or not 0 < port < 65536:
        raise AddressError(f"{where}: must be the Ray head's GCS address HOST:PORT (port 6379 by default)")
    return host, port


def _resolve(where: str, host: str, port: int, timeout: float) -> list:
    """``getaddrinfo`` on a thread, so that a resolver that does not answer costs at most ``timeout``."""
    result: list = []

    def look_up() -> None:
        try:
            result.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
        except OSError as err:
            result.append(err)

    thread = threading.Thread(target=look_up, name="ray-address-lookup", daemon=True)
    thread.start()
    thread.join(timeout)
    if not result:
        raise AddressError(f"{where}: host {host!r} not resolved within {timeout:g} s")
    if isinstance(result[0], OSError):
        reason = getattr(result[0], "strerror", None) or str(result[0])
        raise AddressError(f"{where}: unknown host {host!r} ({reason})")
    return result[0]


def _probe(where: str, infos: list, host: str, port: int, deadline: float, timeout: float) -> None:
    """Connect to the first address of ``infos`` that takes a connection and check a gRPC server answers."""
    refused = None
    for family, kind, proto, _, sockaddr in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            with socket.socket(family, kind, proto) as s:
                s.settimeout(left)
                s.connect(sockaddr)
                if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
                    return  # a TLS cluster: its gRPC speaks TLS first; the connection is the check
                s.sendall(_HTTP2_PREFACE + _EMPTY_SETTINGS)
                s.settimeout(max(0.001, deadline - time.monotonic()))
                answer = _read(s, 9)
        except TimeoutError:
            raise AddressError(f"{where}: no answer from {host}:{port} within {timeout:g} s") from None
        except OSError as err:
            refused = err
            continue
        if len(answer) == 9 and answer[3] == _SETTINGS:
            return
        raise AddressError(
            f"{where}: {host}:{port} answers, but not as a Ray cluster (no gRPC server there; the "
            "head's GCS port is 6379 by default)"
        )
    if refused is None:
        raise AddressError(f"{where}: no answer from {host}:{port} within {timeout:g} s")
    reason = refused.strerror or type(refused).__name__
    raise AddressError(f"{where}: no Ray cluster at {host}:{port} ({reason.lower()})")


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data
