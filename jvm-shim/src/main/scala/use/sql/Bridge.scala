package use.sql

import com.fasterxml.jackson.databind.ObjectMapper
import org.apache.spark.sql.AnalysisException

/** USE's Python side, as the JVM calls it (implemented by `use.sql.bridge.Bridge` through py4j).
  *
  * One generic entry point keeps the JVM/Python contract small: `method` names a function of the
  * Python bridge, `request` is its request message (`Protocol.scala`) as JSON, `args` carries the
  * JVM objects a call needs (Catalyst filter expressions, the DataFrame of a write). The answer is
  * the reply message as JSON, or `{"error": ErrorReply}` for an error the user must see.
  */
trait UseBridge {
  def call(method: String, request: String, args: Array[AnyRef]): String
}

/** A USE error as Spark users see it: one clean message (what is wrong, how to fix it), never a
  * Python traceback. An AnalysisException, so PySpark raises `AnalysisException` and JDBC clients
  * get the message as is. `kind` is the error class, named by one rule (`UseException.Kinds`);
  * `retryable`: the Python side found that the step lost a conflict a new attempt on the latest
  * snapshot may win (the DML commands retry then).
  */
class UseException(message: String, val kind: String = UseException.Kinds.Error, cause: Throwable = null, sqlState: String = null,
                   val retryable: Boolean = false)
  extends AnalysisException(message = s"[$kind] $message", cause = Option(cause)) {
  // What JDBC/ODBC clients get as the SQLSTATE (Spark's own errors have one from their error class).
  override def getSqlState: String = Option(sqlState).getOrElse(UseException.sqlState(kind))
}

object UseException {
  /** Every error class is `USE_<NAME>_ERROR`. The Python side names its errors after their
    * `use.errors` class (`TableNotFoundError` -> `USE_TABLE_NOT_FOUND_ERROR`,
    * `use.sql.bridge.error_kind`); an error raised here takes the name of the `use.errors` class
    * that means the same when there is one, else a name of its own by the same rule. These are all
    * the classes the shim raises (tests/test_sql_errors.py checks the rule). */
  object Kinds {
    val Error = "USE_ERROR"
    val Internal = "USE_INTERNAL_ERROR"
    val InvalidArgument = "USE_INVALID_ARGUMENT_ERROR" // use.errors.InvalidArgumentError
    val TableNotFound = "USE_TABLE_NOT_FOUND_ERROR" // use.errors.TableNotFoundError
    val NotSupported = "USE_NOT_SUPPORTED_ERROR"
    val ReadOnlyCatalog = "USE_READ_ONLY_CATALOG_ERROR"
    val ProcedureNotFound = "USE_PROCEDURE_NOT_FOUND_ERROR"
    val NotInstalled = "USE_NOT_INSTALLED_ERROR"
    val UnsupportedFeature = "USE_UNSUPPORTED_FEATURE_ERROR" // use.errors.UnsupportedFeatureError
    val AccessDenied = "USE_ACCESS_DENIED_ERROR" // use.errors.AccessDeniedError
  }

  /** The SQLSTATE of an error raised on the JVM side (the Python side sends its own). */
  def sqlState(kind: String): String = kind match {
    case Kinds.NotSupported | Kinds.ReadOnlyCatalog | Kinds.UnsupportedFeature => "0A000"
    case Kinds.InvalidArgument => "22023"
    case Kinds.ProcedureNotFound => "42883"
    case Kinds.TableNotFound => "42P01"
    case Kinds.NotInstalled => "55000"
    case Kinds.AccessDenied => "42501" // insufficient privilege
    case _ => "XX000"
  }
}

/** The registered Python side (one per JVM: the driver's Python process), and the typed call. */
object Bridge {
  @volatile private var impl: UseBridge = _

  val json: ObjectMapper = new ObjectMapper()

  private val NotRegistered =
    "USE's SQL extension is loaded but its Python side is not registered in this driver: build the " +
      "session with use.session.spark_session(), or call use.sql.install(spark) once after starting " +
      "pyspark with the flags `python -m use.shim --conf` prints"

  /** Called from Python (`use.sql.install`). */
  def register(bridge: UseBridge): Unit = { impl = bridge }

  def unregister(): Unit = { impl = null }

  def isRegistered: Boolean = impl != null

  /** Sends `request` to its method of the Python side and returns the reply; a Python error
    * becomes a UseException with its message. */
  def call[R](request: Request[R], args: AnyRef*): R = {
    val bridge = impl
    if (bridge == null) throw new UseException(NotRegistered, UseException.Kinds.NotInstalled)
    val method = request.method
    val answer = try {
      bridge.call(method, Codec.write(request).toString, args.toArray)
    } catch {
      // py4j failures (the Python process is gone, a bug that escaped the Python side's own
      // handler): keep the first line, never the Python traceback.
      case e: Exception =>
        val first = Option(e.getMessage).map(_.linesIterator.find(_.trim.nonEmpty).getOrElse("")).getOrElse("")
        throw new UseException(s"USE's Python side failed in $method: ${e.getClass.getSimpleName}: $first", UseException.Kinds.Internal, e)
    }
    val node = json.readTree(answer)
    val error = node.get("error")
    if (error != null && !error.isNull) {
      val e = Codec.errorReply.read(error, s"$method error")
      throw new UseException(e.message, e.kind, sqlState = e.sqlState, retryable = e.retryable)
    }
    request.reply.read(node, s"$method reply")
  }

  @volatile private var knownProviders: Providers = _

  /** The table providers USE serves and those a procedure's path argument may name: the Python
    * side's decision, asked once per JVM (they are fixed by the installed package). */
  def providers: Providers = {
    if (knownProviders == null) knownProviders = call(ProvidersRequest())
    knownProviders
  }

  def isUseProvider(provider: Option[String]): Boolean =
    provider.exists(p => providers.tables.contains(p.toLowerCase(java.util.Locale.ROOT)))
}
