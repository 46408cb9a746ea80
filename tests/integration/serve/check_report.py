#!/usr/bin/python3
"""Loads a `comfy-orch report --html` file in headless Chromium (Debian's chromium) and checks
that it renders: the DOM Chromium built has a timeline SVG per chart with drawn series, the
screenshot shows the series' colours, and Chromium reported no script error or failed load.
Usage: check_report.py REPORT.html WORKDIR; prints "ok: ..." or raises."""
import os
import struct
import subprocess
import sys
import zlib

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--no-first-run", "--disable-extensions"]
SERIES = {"pager resident": (0x1f, 0x77, 0xb4), "pinned reserved": (0xff, 0x7f, 0x0e),
          "device free": (0x94, 0x67, 0xbd)}


def run_chromium(args, workdir):
    env = dict(os.environ, HOME=workdir, XDG_CONFIG_HOME=workdir, XDG_CACHE_HOME=workdir)
    r = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={workdir}/profile", *args],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, f"chromium exited {r.returncode}:\n{r.stderr[-4000:]}"
    return r


def png_pixels(path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG, decoded here."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous, i = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = previous[x]
            c = previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + a) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + b) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(line)
        previous = line
    return width, height, rows, channels


def main():
    report, workdir = os.path.abspath(sys.argv[1]), sys.argv[2]
    url = "file://" + report
    dom = run_chromium(["--dump-dom", url], workdir)
    text = dom.stdout
    charts = text.count('<svg class="timeline"')
    assert charts >= 2, f"{charts} timeline charts in the DOM"
    assert text.count("<polyline") >= charts, "the charts have no series"
    assert 'points=""' not in text.replace('points="" ', ""), "a series with no points"
    assert "<script" not in text, "the report must hold no script"
    for bad in ("Uncaught", "ERR_FILE_NOT_FOUND", "net::ERR_"):
        assert bad not in dom.stderr, f"chromium said {bad}:\n{dom.stderr[-4000:]}"
    shot = os.path.join(workdir, "report.png")
    run_chromium([f"--screenshot={shot}", "--window-size=1100,1400", url], workdir)
    width, height, rows, channels = png_pixels(shot)
    found = {}
    for name, rgb in SERIES.items():
        n = 0
        for line in rows:
            for x in range(0, width * channels, channels):
                if all(abs(line[x + k] - rgb[k]) <= 12 for k in range(3)):
                    n += 1
        found[name] = n
    assert all(n >= 50 for n in found.values()), f"series pixels in the screenshot: {found}"
    print(f"ok: {charts} charts, series pixels {found}, {width}x{height}")


if __name__ == "__main__":
    main()
