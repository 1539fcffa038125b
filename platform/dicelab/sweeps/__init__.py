"""Sweeps: search spaces, Ray Tune wiring, the sweep driver and cluster submission.

Modules are imported where needed (`dicelab sweep` / `dicelab submit`): importing this package does not
import Ray, so `dicelab trial` and config validation stay light.
"""
