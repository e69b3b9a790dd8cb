// For people who have sbt. The project's own setup compiles the JVM shim with the Scala compiler
// shipped inside pyspark's jars (`python -m use.shim`, run on first use by use.session); nothing
// here is needed to build or test USE.
ThisBuild / scalaVersion := "2.13.16"

lazy val shim = (project in file("jvm-shim"))
  .settings(
    name := "use-jvm-shim",
    libraryDependencies += "org.apache.spark" %% "spark-sql" % "4.1.1" % Provided
  )
