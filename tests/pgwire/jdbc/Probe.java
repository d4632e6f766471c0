import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.util.Properties;

/**
 * What DBeaver's PostgreSQL connection asks through pgjdbc before and while it shows a table:
 * the server's product, the schemas, the tables and a table's columns by DatabaseMetaData, then
 * a prepared query. Each row is printed as a line of tab-separated name=value pairs after the
 * name of what was asked, and "end" closes each answer.
 *
 * Arguments: the JDBC URL, the user, the password, the table, and a query of one long parameter
 * with that parameter.
 */
public class Probe {
    public static void main(String[] args) throws Exception {
        Properties properties = new Properties();
        properties.setProperty("user", args[1]);
        properties.setProperty("password", args[2]);
        try (Connection c = DriverManager.getConnection(args[0], properties)) {
            DatabaseMetaData md = c.getMetaData();
            System.out.println("product\tname=" + md.getDatabaseProductName()
                + "\tversion=" + md.getDatabaseProductVersion());
            dump("schemas", md.getSchemas());
            dump("tables", md.getTables(null, "public", "%", new String[] {"TABLE"}));
            dump("columns", md.getColumns(null, "public", args[3], "%"));
            try (PreparedStatement s = c.prepareStatement(args[4])) {
                s.setLong(1, Long.parseLong(args[5]));
                dump("query", s.executeQuery());
            }
        }
    }

    static void dump(String what, ResultSet rs) throws SQLException {
        ResultSetMetaData m = rs.getMetaData();
        while (rs.next()) {
            StringBuilder line = new StringBuilder(what);
            for (int i = 1; i <= m.getColumnCount(); i++) {
                line.append('\t').append(m.getColumnLabel(i).toLowerCase()).append('=')
                    .append(rs.getString(i));
            }
            System.out.println(line);
        }
        System.out.println(what + "\tend");
    }
}
