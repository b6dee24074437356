"""The report as a browser shows it: Debian's headless Chromium loads a copy of a report page with a script that
measures it after the load event (each image: decoded, its natural size, how many of its pixels are opaque and how
many are ink; the page's scroll width against its width) and prints the DOM with the measurements in it; and takes
a screenshot. A missing Chromium is a failure that says how to install it (``make test`` does), never a skip."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
)  # the script reads the images' pixels: file:// pages are one origin
TIMEOUT_S = 180

MEASURE = """<script>
window.addEventListener('load', () => {
  const doc = document.documentElement;
  const images = [...document.images].map(img => {
    const out = {src: img.getAttribute('src'), complete: img.complete, width: img.naturalWidth,
                 height: img.naturalHeight, shown: img.getBoundingClientRect().right, opaque: 0, ink: 0, error: null};
    try {
      const canvas = document.createElement('canvas');
      canvas.width = img.naturalWidth;
      canvas.height = img.naturalHeight;
      const context = canvas.getContext('2d');
      context.drawImage(img, 0, 0);
      const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
      for (let i = 0; i < data.length; i += 4) {
        if (data[i + 3] === 255) out.opaque++;
        if (data[i] < 200 || data[i + 1] < 200 || data[i + 2] < 200) out.ink++;
      }
    } catch (e) { out.error = String(e); }
    return out;
  });
  const pre = document.createElement('pre');
  pre.id = 'barriersim-measured';
  pre.textContent = JSON.stringify({images, scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth});
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(
            "chromium not found: the report's browser test needs Debian's chromium package "
            "(apt-get install chromium; make test installs it)",
            pytrace=False,
        )
    return found


def _run(*args: str, width: int, height: int) -> str:
    with tempfile.TemporaryDirectory(prefix="barriersim-chromium-") as profile:
        done = subprocess.run(
            [chromium(), *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


def measure(page: Path, width: int = 1280, height: int = 1600) -> dict:
    """Load ``page`` (a copy beside it, with the measuring script) at a window of ``width`` × ``height``; what the
    script measured."""
    probe = page.with_name(f".measure-{page.name}")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    try:
        dom = _run("--dump-dom", probe.resolve().as_uri(), width=width, height=height)
    finally:
        probe.unlink()
    found = re.search(r'<pre id="barriersim-measured">(.*?)</pre>', dom, re.S)
    assert found, f"the measuring script did not run: {dom[-1000:]}"
    return json.loads(html.unescape(found.group(1)))


def screenshot(page: Path, out: Path, width: int = 1280, height: int = 1600) -> Path:
    _run(f"--screenshot={out}", page.resolve().as_uri(), width=width, height=height)
    assert out.is_file(), f"chromium wrote no screenshot to {out}"
    return out
