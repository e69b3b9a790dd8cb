package use.sql {

  import java.util

  import org.apache.spark.sql.connector.catalog.{Table, TableProvider}
  import org.apache.spark.sql.connector.expressions.{Expressions, Transform}
  import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2
  import org.apache.spark.sql.types.StructType
  import org.apache.spark.sql.util.CaseInsensitiveStringMap

  /** `format("delta")` on a path: the Delta table there, read and written like a catalog table. */
  class DeltaPathProvider extends TableProvider {
    private var described: Option[(String, TableMeta)] = None

    private def path(options: util.Map[String, String]): String = {
      val p = new CaseInsensitiveStringMap(options).get("path")
      if (p == null) throw new UseException("format(\"delta\") needs a table path: .load(path) / .save(path)", UseException.Kinds.InvalidArgument)
      p
    }

    private def meta(options: util.Map[String, String]): TableMeta = {
      val p = path(options)
      described.filter(_._1 == p).map(_._2).getOrElse {
        val opts = new CaseInsensitiveStringMap(options)
        val version = Option(opts.get("versionAsOf")).map(_.toLong)
        val m = TableMeta.describe(p, "delta", version)
        described = Some(p -> m)
        m
      }
    }

    override def inferSchema(options: CaseInsensitiveStringMap): StructType = meta(options).schema

    override def inferPartitioning(options: CaseInsensitiveStringMap): Array[Transform] =
      meta(options).partitionColumns.map(c => Expressions.identity(c): Transform).toArray

    override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table = {
      val m = meta(properties)
      new UseTable(m, None, s"delta.`${path(properties)}`", pinned = new CaseInsensitiveStringMap(properties).containsKey("versionAsOf"))
    }
  }

  /** `format("qbeast")` on a path stays the Python data source (`use.qbeast.datasource`: pruning
    * reads, staging appends), registered by `use.sql.install` under `PythonName` because Spark lets
    * no Python data source take a name a JVM class answers to. This provider exists so that
    * `USING qbeast` names a DSv2 provider in every session (JDBC ones included), which routes
    * CREATE TABLE / CTAS / saveAsTable to the session catalog. */
  class QbeastPathProvider extends TableProvider {
    private lazy val python = {
      QbeastPathProvider.ensureRegistered(
        org.apache.spark.sql.SparkSession.active.asInstanceOf[org.apache.spark.sql.classic.SparkSession])
      val p = new PythonDataSourceV2()
      p.setShortName(QbeastPathProvider.PythonName)
      p
    }
    override def inferSchema(options: CaseInsensitiveStringMap): StructType = python.inferSchema(options)
    override def inferPartitioning(options: CaseInsensitiveStringMap): Array[Transform] = python.inferPartitioning(options)
    override def getTable(schema: StructType, partitioning: Array[Transform], properties: util.Map[String, String]): Table =
      python.getTable(schema, partitioning, properties)
    override def supportsExternalMetadata(): Boolean = python.supportsExternalMetadata()
  }

  object QbeastPathProvider {
    /** The name `use.sql.install` registers the Python `format("qbeast")` source under. */
    val PythonName = "use_qbeast_python"

    /** Must equal `use.qbeast.datasource.PUSHDOWN_CONF`: filters reach the Python reader. */
    private val PushdownConf = "spark.sql.python.filterPushdown.enabled"

    /** Python data sources and runtime confs are per session, and `use.sql.install` runs in one:
      * a session made after it (`spark.newSession()`, each JDBC session of the Thrift server)
      * gets the source, and its filter pushdown, from the session it was installed in (the
      * default session) the first time it reads `format("qbeast")`. */
    def ensureRegistered(session: org.apache.spark.sql.classic.SparkSession): Unit = {
      val here = session.sessionState.dataSourceManager
      if (here.dataSourceExists(PythonName)) return
      val root = org.apache.spark.sql.SparkSession.getDefaultSession
        .map(_.asInstanceOf[org.apache.spark.sql.classic.SparkSession])
        .filter(r => (r ne session) && r.sessionState.dataSourceManager.dataSourceExists(PythonName))
        .getOrElse(throw new UseException("format(\"qbeast\") on a path needs USE's Python data source: call " +
          "use.sql.install(spark) once (use.session.spark_session() does), or use a table: CREATE TABLE ... USING qbeast " +
          "LOCATION '<path>'", UseException.Kinds.NotInstalled))
      here.synchronized {
        if (!here.dataSourceExists(PythonName)) {
          here.registerDataSource(PythonName, root.sessionState.dataSourceManager.lookupDataSource(PythonName))
        }
      }
      val conf = session.sessionState.conf
      if (!conf.contains(PushdownConf)) {
        Option(root.sessionState.conf.getConfString(PushdownConf, null)).foreach(v => conf.setConfString(PushdownConf, v))
      }
    }
  }
}

// Spark resolves a provider name `p` to the class `p.DefaultSource` when no data source registers
// that short name; these two make `USING delta` and `USING qbeast` resolve without a service file.
package delta {
  class DefaultSource extends use.sql.DeltaPathProvider
}

package qbeast {
  class DefaultSource extends use.sql.QbeastPathProvider
}
