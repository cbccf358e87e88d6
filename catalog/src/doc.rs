//! docs/faults.md, rendered from the catalog: the document people read is
//! the table the code reads (a test fails when they differ; regenerate with
//! `FLEETOP_BLESS=1 cargo test -p fleetop-catalog`).

use std::fmt::Write;

use crate::{AMD_FAULTS, Action, FLAGS, XIDS};

/// The whole of docs/faults.md.
pub fn render() -> String {
    let mut s = String::new();
    s.push_str(
        "# Faults: what each flag means and what to do\n\n\
         Generated from the fault catalog (`catalog/src`): do not edit by hand; run\n\
         `FLEETOP_BLESS=1 cargo test -p fleetop-catalog` after changing the catalog.\n\n\
         Every flag fleetop raises has an action. The alerts screen, node detail, the\n\
         JSON export (`action`, `action_detail`), the agent's `/metrics` (`action` label)\n\
         and Alertmanager alerts (`action` label, `runbook_url` annotation) all say the\n\
         same. Severity follows the action: nothing to do is `info`; the job's owner or\n\
         a fix at the next window is `warn`; anything done to the node now is `crit`.\n\
         A detector grades a mild degree lower (noted per flag), never higher.\n\n\
         A fault that keeps asking for a reset or a reboot escalates: the same XID in\n\
         its third boot within 7 days on the same GPU (the agent's fault journal keeps\n\
         them across restarts and reboots) asks for `replace`.\n\n\
         ## Actions\n\n\
         | action | severity | what a person does |\n|---|---|---|\n",
    );
    for a in Action::ALL.iter().rev() {
        let _ = writeln!(s, "| `{}` | {} | {} |", a.name(), a.severity().name(), a.says());
    }
    s.push('\n');
    for e in FLAGS {
        let _ = write!(
            s,
            "## {}\n\n{}.\n\n- now: `{}`: {}\n",
            e.kind,
            capital(e.meaning),
            e.immediate.name(),
            e.immediate.says()
        );
        if let Some(next) = e.investigate {
            let _ = writeln!(s, "- if it recurs: `{}`: {}", next.name(), next.says());
        }
        s.push('\n');
        for step in e.runbook {
            let _ = writeln!(s, "{step}");
            s.push('\n');
        }
    }
    s.push_str(
        "## XID catalog\n\n\
         Codes and resolution buckets from NVIDIA's XID catalog, mapped to fleetop's\n\
         actions; the meanings are fleetop's words. A code not listed is taken as\n\
         `reset_gpu` (crit): nothing says it is harmless.\n\n\
         | XID | meaning | now | if it recurs | severity |\n|---|---|---|---|---|\n",
    );
    for x in XIDS {
        let _ = writeln!(
            s,
            "| {} | {} | `{}` | {} | {} |",
            x.code,
            x.meaning.replace('|', "/"),
            x.immediate.name(),
            x.investigate.map_or("-".to_string(), |a| format!("`{}`", a.name())),
            x.immediate.severity().name()
        );
    }
    s.push_str(
        "\n## AMD fault catalog\n\n\
         What the agent reads of an AMD Instinct GPU through AMD SMI, mapped to\n\
         fleetop's actions; the meanings are fleetop's words, the source the public\n\
         document the fact comes from. Events and XGMI errors raise `gpu_event`;\n\
         uncorrectable RAS errors `ecc_uncorrected` (the block's action); throttle\n\
         words `throttled`; pending bad pages `remap_pending`. An uncorrectable error\n\
         in HBM (UMC) asks what NVIDIA's uncorrectable ECC does.\n\n\
         | fault | AMD SMI reports | meaning | now | if it recurs | severity | source |\n|---|---|---|---|---|---|---|\n",
    );
    for f in AMD_FAULTS {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | `{}` | {} | {} | <{}> |",
            f.code,
            f.seen_as.replace('|', "/"),
            f.meaning.replace('|', "/"),
            f.immediate.name(),
            f.investigate.map_or("-".to_string(), |a| format!("`{}`", a.name())),
            f.immediate.severity().name(),
            f.source
        );
    }
    s
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn docs_faults_md_is_the_catalog() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/faults.md");
        let want = super::render();
        if std::env::var_os("FLEETOP_BLESS").is_some() {
            std::fs::write(&path, &want).expect("writes docs/faults.md");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/faults.md differs from the catalog: run FLEETOP_BLESS=1 cargo test -p fleetop-catalog"
        );
    }

    #[test]
    fn every_flag_has_a_runbook_section() {
        let doc = super::render();
        for e in crate::FLAGS {
            assert!(doc.contains(&format!("\n## {}\n\n", e.kind)), "{}", e.kind);
        }
    }
}
