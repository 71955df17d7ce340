"""The Python side of the JavaScript API (web/ in the repository): called from Pyodide."""
