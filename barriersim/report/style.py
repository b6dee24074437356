"""The report pages' one style sheet (``index.html`` and ``restore.html``)."""

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1480px; padding: 0 1em; color: #222; }
* { box-sizing: border-box; }
.table { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f2f2f2; }
figure { margin: 1em 0 2em; }
figcaption { font-size: 0.9em; color: #555; }
img { max-width: 100%; height: auto; display: block; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; }
.note { font-size: 0.85em; color: #555; }
"""
