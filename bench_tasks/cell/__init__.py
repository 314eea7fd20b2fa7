"""A cell's life: provision, drive, land, teardown — run in this process, as Airflow's steps, or per host."""
