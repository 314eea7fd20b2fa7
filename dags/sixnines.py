"""This repository's DAG file: every sixnines DAG of `matrices/` (see `sixnines_airflow.dag_file`)."""

from sixnines_airflow.dag_file import declare_dags

declare_dags(globals())
