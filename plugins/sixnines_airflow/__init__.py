"""sixnines on Airflow: the DAG factories, the cell tasks and the failure notifier.

DAG files in `dags/` only call `build_sweep_dags` and `build_compare_dag`; everything that measures lives
in `bench_tasks` (importable and tested without Airflow).
"""
