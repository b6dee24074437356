"""Reports on run directories: Flink-style checkpoint statistics, plots (PNG) and an HTML page.

How this works: ``barriersim.rundir`` finds the runs under a directory and loads their tables into pandas;
``plots`` draws each figure from pandas DataFrames with matplotlib (Agg); ``html`` puts the figures, the
summary table computed by ``barriersim.spark.analytics`` (Spark on Ray) and the verification blocks on one
page; ``cli`` is the ``barriersim report`` subcommand. The report uses the Spark analytics, never the other
way round: both read run directories through ``barriersim.rundir``, which imports neither.
"""
