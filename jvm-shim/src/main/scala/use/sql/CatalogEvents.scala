package use.sql

import java.util.concurrent.{LinkedBlockingQueue, TimeUnit}
import java.util.concurrent.atomic.AtomicBoolean

import org.apache.spark.sql.catalyst.catalog._

/** Table changes of the metastore (CREATE / ALTER / DROP / RENAME TABLE, DROP DATABASE), queued for
  * the continuous optimization service, which drains the queue from its own Python thread.
  *
  * Why a queue: an `ExternalCatalogEventListener` runs on the thread doing the DDL, and a
  * synchronous call into Python there would hold every ALTER up behind the service. Listening on
  * the shared state's external catalog sees every session's DDL (each JDBC session, PySpark), and
  * USE's own DDL too: `UseCatalog` commits the Delta log first and then updates the metastore's
  * mirror through this catalog, so when an event is seen the log already holds the change.
  *
  * Events carry names only (`AlterTableEvent` has no properties); the Python side reads the
  * location from the metastore and the properties from the log. The queue is bounded: if nobody
  * drains it, events past `Capacity` are dropped and the next `poll` says so ("overflow"), and the
  * service then lists every table again instead.
  */
object CatalogEvents {
  val Capacity = 10000

  private val queue = new LinkedBlockingQueue[String](Capacity)
  private val overflowed = new AtomicBoolean(false)
  private var installedOn: Option[ExternalCatalogWithListener] = None

  private def offer(kind: String, database: String, table: String): Unit =
    if (!queue.offer(s"$kind\t$database\t$table")) overflowed.set(true)

  private object Listener extends ExternalCatalogEventListener {
    override def onEvent(event: ExternalCatalogEvent): Unit = event match {
      case e: CreateTableEvent => offer("created", e.database, e.name)
      case e: AlterTableEvent => offer("altered", e.database, e.name)
      case e: DropTableEvent => offer("dropped", e.database, e.name)
      case e: RenameTableEvent =>
        offer("dropped", e.database, e.name)
        offer("created", e.database, e.newName)
      case e: DropDatabaseEvent => offer("droppedDatabase", e.database, "")
      case _ => ()
    }
  }

  /** Start queueing the events of `catalog` (`sharedState.externalCatalog`); idempotent. Events
    * queued before (by an earlier install) are discarded: a new listener starts from a full listing. */
  def install(catalog: ExternalCatalogWithListener): Unit = synchronized {
    if (!installedOn.contains(catalog)) {
      installedOn.foreach(_.removeListener(Listener))
      catalog.addListener(Listener)
      installedOn = Some(catalog)
    }
    queue.clear()
    overflowed.set(false)
  }

  /** Stop queueing (the service stopped); queued events are discarded. */
  def uninstall(): Unit = synchronized {
    installedOn.foreach(_.removeListener(Listener))
    installedOn = None
    queue.clear()
    overflowed.set(false)
  }

  /** The queued events, waiting up to `timeoutMs` for the first: one line per event,
    * "kind\tdatabase\ttable", and a line "overflow\t\t" first if events were dropped. "" if none. */
  def poll(timeoutMs: Long): String = {
    val first = queue.poll(timeoutMs, TimeUnit.MILLISECONDS)
    val lines = new java.util.ArrayList[String]()
    if (overflowed.getAndSet(false)) lines.add("overflow\t\t")
    if (first != null) {
      lines.add(first)
      queue.drainTo(lines)
    }
    String.join("\n", lines)
  }
}
