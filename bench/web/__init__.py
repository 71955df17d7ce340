"""Benchmarks and runners for edgerun in JavaScript (Pyodide under Node) and its numpy-free native path."""
