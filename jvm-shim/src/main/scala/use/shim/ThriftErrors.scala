package use.shim

import java.io.{PrintStream, PrintWriter}
import java.util.{List => JList, Map => JMap}

import scala.jdk.CollectionConverters._

import org.apache.hadoop.hive.conf.HiveConf
import org.apache.hive.service.CompositeService
import org.apache.hive.service.auth.HiveAuthFactory
import org.apache.hive.service.cli._
import org.apache.hive.service.cli.session.SessionManager
import org.apache.hive.service.cli.thrift.ThriftCLIService
import org.apache.hive.service.rpc.thrift.{TOperationHandle, TProtocolVersion, TRowSet, TTableSchema}
import org.apache.spark.SparkThrowable
import org.apache.spark.sql.AnalysisException

/** A failed statement as a JDBC client should see it: one message, no stack trace.
  *
  * The Thrift service puts `StringUtils.stringifyException(e)` (all of `printStackTrace`) into the
  * error message of a failed asynchronous statement (beeline, the Hive JDBC driver) and every frame
  * of `e` and its causes into the status of a failed synchronous one (PyHive): this exception has no
  * cause and no frames, and prints as its message alone.
  */
final class ClientError(message: String, sqlState: String, code: Int) extends HiveSQLException(message, sqlState, code) {
  setStackTrace(Array.empty)
  override def fillInStackTrace(): Throwable = this
  override def toString: String = getMessage
  override def printStackTrace(s: PrintWriter): Unit = s.println(getMessage)
  override def printStackTrace(s: PrintStream): Unit = s.println(getMessage)
}

object ClientErrors {
  private val MaxCauses = 32
  private val JvmFrame = """^\s+at \S+\(.*\)\s*$""".r
  private val MoreFrames = """^\s*\.\.\. \d+ more\s*$""".r
  private val PythonTraceback = "Traceback (most recent call last):"

  def clean(e: HiveSQLException): HiveSQLException = e match {
    case c: ClientError => c
    case _ => new ClientError(message(e), sqlState(e), e.getErrorCode)
  }

  /** The SQLSTATE of `e`, but a refusal of confined file access keeps its own (42501) when Spark
    * wrapped it, e.g. raised while a file query's schema inference analysed its own plan. */
  private def sqlState(e: Throwable): String =
    Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(MaxCauses)
      .collectFirst { case a: use.sql.UseAccessDenied => a.getSqlState }
      .getOrElse(e match { case h: HiveSQLException => h.getSQLState; case _ => null })

  /** What is wrong, from the error that says it most precisely: the deepest Spark error of the
    * cause chain (the layers above it only repeat it with their class names), an analysis error
    * without the logical plan Spark appends to it; Python and JVM stack traces cut out. */
  def message(e: Throwable): String = {
    val causes = Iterator.iterate(e)(_.getCause).takeWhile(_ != null).take(MaxCauses).toSeq
    val text = causes.reverse.collectFirst { case s: SparkThrowable => s } match {
      case Some(a: AnalysisException) => a.getSimpleMessage
      case Some(s: Throwable) => s.getMessage
      case _ =>
        val deepest = causes.last
        Option(deepest.getMessage).filter(_ => deepest ne e).getOrElse(Option(e.getMessage).getOrElse(e.toString))
    }
    withoutTraces(Option(text).getOrElse(e.toString))
  }

  /** `text` without JVM frames, "... N more" lines and Python tracebacks (their last line, the
    * Python exception, is kept). */
  def withoutTraces(text: String): String = {
    val out = new StringBuilder
    var inTraceback = false
    text.split("\n", -1).foreach { line =>
      if (line.trim == PythonTraceback) inTraceback = true
      else if (inTraceback && (line.startsWith(" ") || line.startsWith("\t") || line.trim.isEmpty)) ()
      else {
        inTraceback = false
        if (JvmFrame.findFirstIn(line).isEmpty && MoreFrames.findFirstIn(line).isEmpty) out.append(line).append('\n')
      }
    }
    out.toString.replaceAll("\\s+$", "")
  }
}

/** Stands between a Thrift front end and Spark's CLI service and turns every error on its way to
  * a client into a `ClientError`; everything else is passed through unchanged. */
final class CleanErrorsCLIService(delegate: CLIService) extends CLIService(null) {
  private def clean[T](body: => T): T =
    try body
    catch { case e: HiveSQLException => throw ClientErrors.clean(e) }

  override def getHiveConf: HiveConf = delegate.getHiveConf
  override def getSessionManager: SessionManager = delegate.getSessionManager

  override def getOperationStatus(h: OperationHandle): OperationStatus = {
    val status = clean(delegate.getOperationStatus(h))
    Option(status.getOperationException) match {
      case Some(e) => new OperationStatus(status.getState, ClientErrors.clean(e))
      case None => status
    }
  }

  // A session's settings are checked before it opens, and its user recorded once it is (`ThriftSessions`).
  private def open(u: String, c: JMap[String, String])(body: => SessionHandle): SessionHandle =
    clean { ThriftSessions.checkConf(c); ThriftSessions.opened(delegate, body, u) }

  override def openSession(u: String, p: String, c: JMap[String, String]): SessionHandle =
    open(u, c)(delegate.openSession(u, p, c))
  override def openSession(v: TProtocolVersion, u: String, p: String, c: JMap[String, String]): SessionHandle =
    open(u, c)(delegate.openSession(v, u, p, c))
  override def openSession(v: TProtocolVersion, u: String, p: String, ip: String, c: JMap[String, String]): SessionHandle =
    open(u, c)(delegate.openSession(v, u, p, ip, c))
  override def openSessionWithImpersonation(u: String, p: String, c: JMap[String, String], t: String): SessionHandle =
    open(u, c)(delegate.openSessionWithImpersonation(u, p, c, t))
  override def openSessionWithImpersonation(v: TProtocolVersion, u: String, p: String, c: JMap[String, String], t: String): SessionHandle =
    open(u, c)(delegate.openSessionWithImpersonation(v, u, p, c, t))
  override def openSessionWithImpersonation(
      v: TProtocolVersion, u: String, p: String, ip: String, c: JMap[String, String], t: String): SessionHandle =
    open(u, c)(delegate.openSessionWithImpersonation(v, u, p, ip, c, t))
  override def closeSession(s: SessionHandle): Unit = clean(delegate.closeSession(s))
  override def getInfo(s: SessionHandle, t: GetInfoType): GetInfoValue = clean(delegate.getInfo(s, t))
  override def executeStatement(s: SessionHandle, q: String, c: JMap[String, String]): OperationHandle =
    clean { ThriftSessions.checkConf(c); delegate.executeStatement(s, q, c) }
  override def executeStatement(s: SessionHandle, q: String, c: JMap[String, String], timeout: Long): OperationHandle =
    clean { ThriftSessions.checkConf(c); delegate.executeStatement(s, q, c, timeout) }
  override def executeStatementAsync(s: SessionHandle, q: String, c: JMap[String, String]): OperationHandle =
    clean { ThriftSessions.checkConf(c); delegate.executeStatementAsync(s, q, c) }
  override def executeStatementAsync(s: SessionHandle, q: String, c: JMap[String, String], timeout: Long): OperationHandle =
    clean { ThriftSessions.checkConf(c); delegate.executeStatementAsync(s, q, c, timeout) }
  override def getTypeInfo(s: SessionHandle): OperationHandle = clean(delegate.getTypeInfo(s))
  override def getCatalogs(s: SessionHandle): OperationHandle = clean(delegate.getCatalogs(s))
  override def getSchemas(s: SessionHandle, c: String, sc: String): OperationHandle = clean(delegate.getSchemas(s, c, sc))
  override def getTables(s: SessionHandle, c: String, sc: String, t: String, types: JList[String]): OperationHandle =
    clean(delegate.getTables(s, c, sc, t, types))
  override def getTableTypes(s: SessionHandle): OperationHandle = clean(delegate.getTableTypes(s))
  override def getColumns(s: SessionHandle, c: String, sc: String, t: String, col: String): OperationHandle =
    clean(delegate.getColumns(s, c, sc, t, col))
  override def getFunctions(s: SessionHandle, c: String, sc: String, f: String): OperationHandle =
    clean(delegate.getFunctions(s, c, sc, f))
  override def getPrimaryKeys(s: SessionHandle, c: String, sc: String, t: String): OperationHandle =
    clean(delegate.getPrimaryKeys(s, c, sc, t))
  override def getCrossReference(
      s: SessionHandle, pc: String, ps: String, pt: String, fc: String, fs: String, ft: String): OperationHandle =
    clean(delegate.getCrossReference(s, pc, ps, pt, fc, fs, ft))
  override def getSessionConf(s: SessionHandle): HiveConf = clean(delegate.getSessionConf(s))
  override def cancelOperation(h: OperationHandle): Unit = clean(delegate.cancelOperation(h))
  override def closeOperation(h: OperationHandle): Unit = clean(delegate.closeOperation(h))
  override def getResultSetMetadata(h: OperationHandle): TTableSchema = clean(delegate.getResultSetMetadata(h))
  override def fetchResults(h: OperationHandle): TRowSet = clean(delegate.fetchResults(h))
  override def fetchResults(h: OperationHandle, o: FetchOrientation, n: Long, t: FetchType): TRowSet =
    clean(delegate.fetchResults(h, o, n, t))
  override def getDelegationTokenFromMetaStore(owner: String): String = clean(delegate.getDelegationTokenFromMetaStore(owner))
  override def getDelegationToken(s: SessionHandle, f: HiveAuthFactory, owner: String, renewer: String): String =
    clean(delegate.getDelegationToken(s, f, owner, renewer))
  override def cancelDelegationToken(s: SessionHandle, f: HiveAuthFactory, token: String): Unit =
    clean(delegate.cancelDelegationToken(s, f, token))
  override def renewDelegationToken(s: SessionHandle, f: HiveAuthFactory, token: String): Unit =
    clean(delegate.renewDelegationToken(s, f, token))
  override def getQueryId(h: TOperationHandle): String = clean(delegate.getQueryId(h))
}

object ThriftErrors {

  /** Closing a JDBC session failed now and then with `NoClassDefFoundError:
    * org/apache/hadoop/hive/llap/security/LlapSigner$Signable` (and left the session half-closed):
    * Hive's `SessionState.close` asks `Hive.get(conf)` for its thread, and on a Thrift worker thread
    * that had no Hive client yet that creates one which first registers every Hive function, one
    * of which (LLAP's get_splits) needs a class pyspark's jars do not carry. Spark's Thrift server
    * runs Spark's functions, never Hive's registry, so the registration is marked done before any
    * session opens (Hive's own once-only flag), and Hive clients are made without it. */
  private def skipHiveFunctionRegistry(): Unit = {
    val flag = classOf[org.apache.hadoop.hive.ql.metadata.Hive].getDeclaredField("didRegisterAllFuncs")
    flag.setAccessible(true)
    flag.get(null).asInstanceOf[java.util.concurrent.atomic.AtomicInteger].compareAndSet(0, 2) // REG_FUNCS_NO -> _DONE
  }

  /** Put a `CleanErrorsCLIService` in front of the CLI service of every Thrift front end of a
    * started `HiveThriftServer2`; the number of front ends changed. The front ends read their
    * `cliService` field on every call, so sessions opened afterwards all go through it. */
  def install(server: CompositeService): Int = {
    skipHiveFunctionRegistry()
    ThriftSessions.install()
    val field = classOf[ThriftCLIService].getDeclaredField("cliService")
    field.setAccessible(true)
    server.getServices.asScala.toSeq.collect { case front: ThriftCLIService =>
      field.get(front) match {
        case _: CleanErrorsCLIService => ()
        case service: CLIService => field.set(front, new CleanErrorsCLIService(service))
      }
      front
    }.size
  }
}
