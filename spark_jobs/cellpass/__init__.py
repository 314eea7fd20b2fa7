"""The cell pass: a run's raw Parquet analysed by one Python task per cell, pyarrow and numpy inside, Spark only
scheduling the tasks.

Spark SQL spent most of a cold analysis compiling and warming up its plans (issue 15's rounds): a probe counting
one metric's log buckets over 10 M receipts took 10–12 s as a Spark SQL pass, 4.6–5 s as tasks that read their
file with pyarrow and count with numpy. Here each task holds one cell (all its repeats), so every group of every
level (spark_jobs.analysis.LEVELS) lies inside one task, which counts, locates and picks its percentiles itself;
nothing is shuffled. The driver receives per cell its producers' ledger rows, its bucket sums and its summary
rows, and assembles the same spark_jobs.analysis.Analysis the Spark SQL passes give (which remain for frames built
in memory and files under schemes a task cannot open). On an S3 lake a task first copies its `s3a://` objects
to its local disk with pyarrow's S3 filesystem, reached with the settings the driver hands it.

A task streams its files a batch of rows at a time (read.BATCH_ROWS, a few columns at once), so its memory does
not grow with its cell but with what it keeps: per unit a bit per message for each set the ledger counts (while
that unit is counted), the receipts of messages received more than once, and per series its bucket table and the
candidates of the located buckets (value and group number, 12 bytes each). The exact method is two passes by
nature (spark_jobs.exact): the bucket sums of every series in one stream, then, once the ranks are located, a
second stream keeping only the located buckets' samples.

- read: a cell's files in batches of numpy columns with validity masks; an S3 lake's objects copied locally
- keys: messages as int64 keys, and sets of them as bitmaps (or sorted keys where seqs spread too wide)
- ledger: per producer, the message accounting and the gate's checks (spark_jobs.ledger's, without words)
- samples: first receipts, then one metric × basis of sample values at a time
- sums: the bucket sums (spark_jobs.analysis.bucket_sums' WHOLE, TIMED and DONE rows), merged batch by batch
- pick: the candidates of located buckets at every level, and the exact values picked from them
- task: what one task does; route: the driver's side
"""
