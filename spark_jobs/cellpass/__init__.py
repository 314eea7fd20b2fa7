"""The cell pass: a run's raw Parquet analysed by one Python task per cell, pyarrow and numpy inside, Spark only
scheduling the tasks.

Spark SQL spent most of a cold analysis compiling and warming up its plans (issue 15's rounds): a probe counting
one metric's log buckets over 10 M receipts took 10–12 s as a Spark SQL pass, 4.6–5 s as tasks that read their
file with pyarrow and count with numpy. Here each task holds one cell (all its repeats), so every group of every
level (spark_jobs.analysis.LEVELS) lies inside one task, which counts, locates and picks its percentiles itself:
one read of the raw files, no second pass, no shuffle. The driver receives per cell its producers' ledger rows,
its bucket sums and its summary rows, and assembles the same spark_jobs.analysis.Analysis the Spark SQL passes
give (which remain for frames built in memory and cells too large for one task to hold:
route.CELL_TASK_MAX_RAW_BYTES; a run may be split between the two routes, cell by cell). On an S3 lake the tasks
fetch their `s3a://` objects with pyarrow's S3 filesystem, reached with the settings the driver hands them.

- read: a cell's files as numpy columns with validity masks
- ledger: per producer, the message accounting and the gate's checks (spark_jobs.ledger's, without words)
- samples: first receipts, then one metric × basis of sample values at a time
- sums: the bucket sums (spark_jobs.analysis.bucket_sums' WHOLE, TIMED and DONE rows)
- pick: the candidates of located buckets at every level, and the exact values picked from them
- task: what one task does; route: the driver's side
"""
