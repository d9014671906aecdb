//! The cluster's settings as Hadoop's clients read them: `core-site.xml` then `hdfs-site.xml`
//! from `HADOOP_CONF_DIR` (else `$HADOOP_HOME/etc/hadoop`), later values over earlier. Only what
//! WebHDFS needs is asked (`fs.defaultFS`, a nameservice's NameNodes); `hdfs://` is read by
//! `hdfs-native`, which reads the same files itself.

use std::collections::HashMap;
use std::path::PathBuf;

#[derive(Debug, Default)]
pub(super) struct HadoopConf {
    values: HashMap<String, String>,
}

impl HadoopConf {
    /// The environment's configuration; none (and no error) when there is no directory or file,
    /// as Hadoop's clients run on their defaults. A file that is not XML is skipped with a log
    /// line naming it.
    pub(super) fn from_env() -> HadoopConf {
        let dir = std::env::var_os("HADOOP_CONF_DIR")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HADOOP_HOME").map(|h| PathBuf::from(h).join("etc/hadoop"))
            });
        let mut conf = HadoopConf::default();
        let Some(dir) = dir else { return conf };
        for name in ["core-site.xml", "hdfs-site.xml"] {
            let path = dir.join(name);
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            if let Err(e) = conf.read(&text) {
                log::warn!("{}: not read ({e})", path.display());
            }
        }
        conf
    }

    #[cfg(test)]
    pub(super) fn from_pairs(pairs: &[(&str, &str)]) -> HadoopConf {
        HadoopConf {
            values: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    /// `<configuration><property><name>…</name><value>…</value></property>…`.
    fn read(&mut self, text: &str) -> Result<(), roxmltree::Error> {
        let options = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, options)?;
        for p in doc.descendants().filter(|n| n.has_tag_name("property")) {
            let child = |tag: &str| {
                p.children()
                    .find(|c| c.has_tag_name(tag))
                    .and_then(|c| c.text())
                    .map(str::trim)
            };
            if let (Some(name), Some(value)) = (child("name"), child("value")) {
                self.values.insert(name.to_string(), value.to_string());
            }
        }
        Ok(())
    }

    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// The HTTP (or HTTPS) addresses of nameservice `ns`'s NameNodes, in
    /// `dfs.ha.namenodes.NS`'s order; `None` when `ns` is not one.
    pub(super) fn nameservice_http(&self, ns: &str, tls: bool) -> Option<Vec<String>> {
        let ids = self.get(&format!("dfs.ha.namenodes.{ns}"))?;
        let key = if tls { "https-address" } else { "http-address" };
        let out: Vec<String> = ids
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty())
            .filter_map(|id| self.get(&format!("dfs.namenode.{key}.{ns}.{id}")))
            .map(str::to_string)
            .collect();
        (!out.is_empty()).then_some(out)
    }
}

/// The user simple authentication names: `HADOOP_USER_NAME`, else the login user, as Hadoop's
/// clients take it.
pub fn hadoop_user() -> Result<String, String> {
    match std::env::var("HADOOP_USER_NAME") {
        Ok(u) if !u.is_empty() => Ok(u),
        _ => whoami::username().map_err(|e| format!("no login user ({e}); set HADOOP_USER_NAME")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_read_later_files_over_earlier() {
        let mut c = HadoopConf::default();
        c.read(
            r#"<?xml version="1.0"?>
<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>
<configuration>
  <property><name>fs.defaultFS</name><value> hdfs://ns1 </value></property>
  <property><name>a</name><value>1</value><final>true</final></property>
</configuration>"#,
        )
        .unwrap();
        c.read(
            "<configuration><property><name>a</name><value>2</value></property></configuration>",
        )
        .unwrap();
        assert_eq!(c.get("fs.defaultFS"), Some("hdfs://ns1"));
        assert_eq!(c.get("a"), Some("2"));
        assert!(c.read("<configuration>").is_err());
        assert_eq!(c.nameservice_http("ns1", false), None);
    }
}
