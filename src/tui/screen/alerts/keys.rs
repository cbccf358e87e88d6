//! The alerts screen's keys: move, sort, fold, open the alert's node, and
//! quiet an alert (`D` is in `actions`).

use crossterm::event::{KeyCode, KeyEvent};

use crate::model::flag::{Silence, Subject};
use crate::model::request::Request;
use crate::tui::app::{App, moved};
use crate::tui::screen::vertical;

pub(crate) fn on_key(app: &mut App, k: KeyEvent) -> bool {
    let len = app.alert_rows().len();
    if let Some(d) = vertical(&k, 10) {
        app.alerts.cursor = moved(app.alerts.cursor, d, len);
        return true;
    }
    match k.code {
        KeyCode::Char('s') => app.alerts.sort = app.alerts.sort.next(),
        KeyCode::Char('z') => app.alerts.folded = !app.alerts.folded,
        KeyCode::Char('a') => quiet_alert(app, None),
        KeyCode::Char(c @ ('1' | '4' | '8')) => {
            let hours = i64::from(c as u8 - b'0');
            quiet_alert(app, Some(hours * 3_600_000));
        }
        KeyCode::Enter => {
            let target = app.alert_rows().get(app.alerts.cursor).map(|r| {
                let gpu = match r.flag.subject {
                    Subject::Gpu(g) => Some(g),
                    _ => None,
                };
                (r.node, gpu)
            });
            if let Some((node, gpu)) = target {
                app.open_detail(node, gpu);
                app.select_node(node);
            }
        }
        _ => return false,
    }
    true
}

/// `a` acknowledges the selected alert (until it clears); `1` `4` `8`
/// silence its kind on its node for that many hours. Again on a quiet one
/// lifts it. Saved in the state dir and audited by `ops`.
fn quiet_alert(app: &mut App, for_ms: Option<i64>) {
    let Some((node, flag)) = app
        .alert_rows()
        .get(app.alerts.cursor)
        .filter(|r| r.cleared_ms.is_none())
        .map(|r| (app.store.nodes[r.node].target.name.clone(), r.flag.clone()))
    else {
        return;
    };
    let now = app.now_ms;
    let before = app.alerts.silences.len();
    app.alerts.silences.retain(|s| !s.covers(&node, &flag, now));
    let made = if app.alerts.silences.len() < before {
        app.message = Some(format!("{} on {node}: no longer quiet", flag.kind.name()));
        Silence {
            node,
            kind: flag.kind,
            ack: None,
            until_ms: None,
            by: String::new(),
            at_ms: now,
        }
    } else {
        let s = Silence {
            node: node.clone(),
            kind: flag.kind,
            ack: for_ms.is_none().then(|| (flag.subject.key(), flag.since_ms)),
            until_ms: for_ms.map(|d| now + d),
            by: String::new(),
            at_ms: now,
        };
        app.message = Some(match for_ms {
            None => format!("{} on {node} acknowledged", flag.kind.name()),
            Some(d) => format!("{} on {node} silenced for {} h", flag.kind.name(), d / 3_600_000),
        });
        app.alerts.silences.push(s.clone());
        s
    };
    app.out.request = Some(Request::Silences {
        all: app.alerts.silences.clone(),
        made,
    });
}
