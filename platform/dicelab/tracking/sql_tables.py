"""The columns of MLflow's tracking tables that dicelab reads from a SQL store, as SQLAlchemy Core tables.

The analysis reads a SQL store (the embedded SQLite file, a team server's PostgreSQL) with flat SELECTs on
MLflow's own tables. Declaring the columns it reads here, instead of taking them from MLflow's ORM models,
keeps MLflow out of that path: importing MLflow and its SQL store (whose module configures every ORM mapper)
costs about 3.5 s of a `dicelab analyze` on the 2-core test machine (benchmarks/results/analyze_ab_sql.json).
`tests/tracking/test_sql_tables.py` checks every column declared here against MLflow's models, so a release
that renames or retypes one fails there, naming it. Importing this module does not import MLflow.
"""

from __future__ import annotations

import sqlalchemy as sa

# mlflow.store.db.db_types.DATABASE_ENGINES: the SQL databases MLflow can keep its tracking store in
DATABASE_ENGINES = ("postgresql", "mysql", "sqlite", "mssql")
ACTIVE = "active"  # mlflow.entities.LifecycleStage.ACTIVE: not deleted
MIGRATIONS = "alembic_version"  # the table of MLflow's schema revision: every MLflow SQL store has it

_metadata = sa.MetaData()


def _keyed(name: str) -> sa.Table:
    """tags and params: key, value, run_uuid."""
    return sa.Table(
        name,
        _metadata,
        sa.Column("key", sa.String(250)),
        sa.Column("value", sa.String(8000)),
        sa.Column("run_uuid", sa.String(32)),
    )


def _metric(name: str) -> sa.Table:
    """metrics (every logged value) and latest_metrics (the latest of each run and key)."""
    return sa.Table(
        name,
        _metadata,
        sa.Column("key", sa.String(250)),
        sa.Column("value", sa.Float(precision=53)),
        sa.Column("timestamp", sa.BigInteger),
        sa.Column("step", sa.BigInteger),
        sa.Column("is_nan", sa.Boolean),
        sa.Column("run_uuid", sa.String(32)),
    )


EXPERIMENTS = sa.Table(
    "experiments",
    _metadata,
    sa.Column("experiment_id", sa.Integer),
    sa.Column("name", sa.String(256)),
    sa.Column("lifecycle_stage", sa.String(32)),
)
RUNS = sa.Table(
    "runs",
    _metadata,
    sa.Column("run_uuid", sa.String(32)),
    sa.Column("name", sa.String(250)),
    sa.Column("status", sa.String(20)),
    sa.Column("start_time", sa.BigInteger),
    sa.Column("end_time", sa.BigInteger),
    sa.Column("lifecycle_stage", sa.String(20)),
    sa.Column("artifact_uri", sa.String(200)),
    sa.Column("experiment_id", sa.Integer),
)
TAGS = _keyed("tags")
PARAMS = _keyed("params")
METRICS = _metric("metrics")
LATEST_METRICS = _metric("latest_metrics")

TABLES = {table.name: table for table in (EXPERIMENTS, RUNS, TAGS, PARAMS, METRICS, LATEST_METRICS)}


def is_database_uri(uri: str) -> bool:
    """Whether `uri` names a SQL store MLflow can back (sqlite, postgresql, mysql, mssql, with a driver)."""
    return uri.split(":", 1)[0].split("+", 1)[0] in DATABASE_ENGINES
