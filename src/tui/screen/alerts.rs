//! The alerts screen: every active flag, then the recently cleared ones.

use super::KeyRow;

pub const KEYS: &[KeyRow] = &[
    ("j k  ↓ ↑", "move"),
    ("g G  PgUp PgDn", "top, bottom, page"),
    ("Enter", "open the node of the alert"),
    ("D", "drain the alert's node, the catalog's reason filled in"),
    ("s", "sort by severity, age, node, kind"),
    ("z", "fold / unfold identical flags of one job into one row"),
    ("a", "acknowledge the alert (until it clears); again to undo"),
    ("1 4 8", "silence this kind on this node for 1, 4 or 8 hours"),
];
