package use.shim

import java.nio.charset.StandardCharsets
import java.nio.file.{Files, NoSuchFileException, Paths}
import java.security.MessageDigest
import java.util.Base64
import javax.crypto.SecretKeyFactory
import javax.crypto.spec.PBEKeySpec
import javax.security.sasl.AuthenticationException

import scala.jdk.CollectionConverters._

import org.apache.hive.service.auth.PasswdAuthenticationProvider
import org.apache.logging.log4j.LogManager

/** `use serve --auth password`: Hive's CUSTOM authentication provider
  * (`hive.server2.custom.authentication.class`), checking each JDBC connection's user and password
  * against the password file `use passwd` writes (its format: `use.server.passwords`).
  *
  * The file is read at every connection, so a user added or removed counts from the next one. The
  * check is the one `use.server.passwords.verify` makes (PBKDF2-HMAC-SHA256 with the line's salt and
  * iterations, compared in constant time; an unknown user costs a hash too). A refusal names the
  * user, never the password, and is logged (logger `use.server.auth`) without it.
  */
class PasswordFileAuthenticator extends PasswdAuthenticationProvider {
  override def Authenticate(user: String, password: String): Unit = {
    val file = Option(System.getProperty(PasswordFileAuthenticator.FileProperty)).getOrElse(
      throw new AuthenticationException("the server has no password file (start it with use serve --auth password --password-file FILE)"))
    if (!PasswordFileAuthenticator.verify(file, Option(user).getOrElse(""), Option(password).getOrElse(""))) {
      PasswordFileAuthenticator.log.warn(s"authentication failed for user '$user'")
      throw new AuthenticationException(s"authentication failed for user '$user': unknown user or wrong password")
    }
  }
}

object PasswordFileAuthenticator {
  /** The JVM system property naming the password file (`use serve` sets it). */
  val FileProperty = "use.auth.passwordFile"
  val Scheme = "pbkdf2-sha256"
  private val DefaultIterations = 600000
  private[shim] val log = LogManager.getLogger("use.server.auth")

  private case class Entry(iterations: Int, salt: Array[Byte], digest: Array[Byte])

  private def entries(file: String): Map[String, Entry] = {
    val lines = try Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8).asScala.toSeq catch {
      case _: NoSuchFileException => throw new AuthenticationException(s"the password file $file does not exist")
    }
    lines.map(_.trim).filter(l => l.nonEmpty && !l.startsWith("#")).flatMap { line =>
      line.split(":", -1) match {
        case Array(user, Scheme, iterations, salt, digest) =>
          scala.util.Try(user -> Entry(iterations.toInt, Base64.getDecoder.decode(salt), Base64.getDecoder.decode(digest))).toOption
        case _ => None
      }
    }.toMap
  }

  private def pbkdf2(password: String, salt: Array[Byte], iterations: Int): Array[Byte] = {
    val spec = new PBEKeySpec(password.toCharArray, salt, iterations, 256)
    try SecretKeyFactory.getInstance("PBKDF2WithHmacSHA256").generateSecret(spec).getEncoded
    finally spec.clearPassword()
  }

  /** Whether `password` is `user`'s in `file` (the rule of `use.server.passwords.verify`). */
  def verify(file: String, user: String, password: String): Boolean = {
    val entry = entries(file).get(user)
    val salt = entry.map(_.salt).getOrElse(new Array[Byte](16))
    val digest = pbkdf2(if (password.isEmpty) "\u0000" else password, salt, entry.map(_.iterations).getOrElse(DefaultIterations))
    entry.exists(e => password.nonEmpty && MessageDigest.isEqual(digest, e.digest))
  }
}
