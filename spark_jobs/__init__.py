"""sixnines' analytics: PySpark jobs over the lake (DESIGN.md, "Data model").

Each job module keeps pure transformations (DataFrame in, DataFrame out) apart from its I/O edges, so the
same functions run under `spark-submit spark_jobs/<job>.py`, from Airflow's SparkSubmitOperator, and in
tests on tiny literal frames. `pipeline.run_analysis` chains percentiles → gate → publish for one run.
"""

from .errors import AnalyticsError, CompareError, GateError

__all__ = ["AnalyticsError", "CompareError", "GateError"]
