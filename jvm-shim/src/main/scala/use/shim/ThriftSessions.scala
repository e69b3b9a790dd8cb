package use.shim

import java.util.{Map => JMap}

import scala.jdk.CollectionConverters._

import org.apache.hive.service.cli.{CLIService, SessionHandle}
import org.apache.logging.log4j.{Level, LogManager}
import org.apache.logging.log4j.core.config.Configurator
import org.apache.spark.sql.SparkSession

import use.sql.{UseAccess, UseException}

/** What the server does as a JDBC session opens and runs statements, beside Spark's Thrift server:
  *  - settings a client passes with the connection (the JDBC URL's `?key=value` part, PyHive's
  *    `configuration`) or with a statement are applied by Spark without a `SET` statement, so the
  *    keys a session may not change (`UseAccess.ProtectedKeys`) are refused here too;
  *  - the session's user (the authenticated one under `--auth`) is recorded in its Spark session
  *    (`spark.qbeast.use.session.user`: USE's commits carry it as `commitInfo.userName`) and in the
  *    server's log (logger `use.server.sessions`, never a password).
  */
object ThriftSessions {
  private val log = LogManager.getLogger("use.server.sessions")
  private val Prefixes = Seq("set:hiveconf:", "set:hivevar:", "set:system:", "set:env:")

  /** The server's log keeps these INFO lines (Spark's own loggers stay at the server's level). */
  def install(): Unit = {
    Configurator.setLevel("use.server.sessions", Level.INFO)
    Configurator.setLevel("use.server.auth", Level.INFO)
  }

  private def confined: Boolean = SparkSession.getDefaultSession.exists(_.conf.getOption(UseAccess.AllowedRootsKey).isDefined)

  /** Refuses settings a client may not make (`ClientError`, SQLSTATE 42501). */
  def checkConf(conf: JMap[String, String]): Unit = if (conf != null && confined) {
    conf.asScala.keys.map(k => Prefixes.find(k.startsWith).map(p => k.substring(p.length)).getOrElse(k)).find(UseAccess.isProtected)
      .foreach { key =>
        throw new ClientError(s"[${UseException.Kinds.AccessDenied}] the setting $key cannot be given by a client of this server: it would " +
          "widen what statements may read, write or delete; the server's operator sets it when starting `use serve`", UseException.sqlState(UseException.Kinds.AccessDenied), 0)
      }
  }

  /** Records the user of a session just opened. */
  def opened(cli: CLIService, handle: SessionHandle, user: String): SessionHandle = {
    val session = scala.util.Try(cli.getSessionManager.getSession(handle)).toOption
    val address = session.flatMap(s => Option(s.getIpAddress)).getOrElse("unknown address")
    sparkSession(cli, handle).foreach(_.conf.set(UseAccess.SessionUserKey, user))
    log.info(s"JDBC session ${handle.getSessionId} opened by user '$user' from $address")
    handle
  }

  /** The Spark session Spark's Thrift server made for `handle` (its operation manager's map). */
  private def sparkSession(cli: CLIService, handle: SessionHandle): Option[SparkSession] = scala.util.Try {
    val manager = cli.getSessionManager.getOperationManager
    val contexts = manager.getClass.getMethod("sessionToContexts").invoke(manager).asInstanceOf[JMap[SessionHandle, SparkSession]]
    Option(contexts.get(handle))
  }.toOption.flatten
}
