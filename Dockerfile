# One image for every sixnines process of the docker-compose deployment: the Airflow components, the Celery
# workers on the default and load-generator queues, and the Spark master and workers. Spark is the pyspark
# wheel's own distribution (spark-class, spark-submit, jars), so the driver (an Airflow worker) and the
# executors run the same Spark, the same Python 3.11 and the same sixnines code: PySpark refuses executors
# whose Python minor version differs from the driver's, and the official Spark images ship another Python.
#
# Build: `docker compose build` (or `docker build -t sixnines .`). Nothing is copied from the host but this
# repository; Kafka jars and other nats-server releases are fetched at run time into $SIXNINES_CACHE.
FROM apache/airflow:3.3.2-python3.11

USER root
# A JDK runtime for Spark (driver, master, workers) and for the Kafka brokers a provisioned cell starts;
# Maven fetches those brokers' jars from Maven Central; git gives every cell the harness's commit (.git is
# part of the build context for that); iproute2 for the load-generator hosts' network namespaces.
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless maven git iproute2 procps \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*
# default-jre-headless keeps this symlink whichever JDK the Debian release ships (17 on bookworm).
ENV JAVA_HOME=/usr/lib/jvm/default-java

# Folders that named volumes are mounted on must exist, owned by airflow, so a new volume takes that owner:
# the harness cache (fetched brokers, the host lease), the brokers' TLS material (written by the broker-certs
# service) and the UI's generated passwords.
ENV SIXNINES_HOME=/opt/sixnines
RUN mkdir -p "${SIXNINES_HOME}/.cache" "${SIXNINES_HOME}/certs" /opt/airflow/auth \
    && chown -R airflow:0 "${SIXNINES_HOME}" /opt/airflow/auth
USER airflow
WORKDIR ${SIXNINES_HOME}

# Dependencies first (the layer is reused while pyproject.toml and the lock are unchanged), every version
# from the project's lock (constraints-3.11.txt, whose Airflow is the base image's); the `deploy` extra adds
# the Celery and Postgres providers.
COPY --chown=airflow:0 pyproject.toml README.md constraints-3.11.txt ./
COPY --chown=airflow:0 bench_tasks/__init__.py bench_tasks/__init__.py
COPY --chown=airflow:0 spark_jobs/__init__.py spark_jobs/__init__.py
COPY --chown=airflow:0 expectations/__init__.py expectations/__init__.py
COPY --chown=airflow:0 plugins/sixnines_airflow/__init__.py plugins/sixnines_airflow/__init__.py
RUN pip install --no-cache-dir -c constraints-3.11.txt "apache-airflow==${AIRFLOW_VERSION}" -e ".[deploy]"

COPY --chown=airflow:0 . .
RUN pip install --no-cache-dir --no-deps -e . && rm -rf sixnines.egg-info \
    && python -c "import bench_tasks, spark_jobs, expectations, sixnines_airflow, pyspark; print(pyspark.__version__)"

# This checkout is the installed package's home (sixnines_airflow.runtime.home): its DAG file reads matrices/ here,
# and the package's entry points register the provider and the report plugin.
ENV AIRFLOW__CORE__DAGS_FOLDER=${SIXNINES_HOME}/dags \
    AIRFLOW__CORE__PLUGINS_FOLDER=${SIXNINES_HOME}/plugins \
    AIRFLOW__CORE__LOAD_EXAMPLES=False \
    SIXNINES_CACHE=${SIXNINES_HOME}/.cache
