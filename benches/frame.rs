//! Frame: drawing the console for 1,024 nodes x 8 GPUs into a buffer (what
//! ratatui then diffs against the screen), at 300x100 and 80x24, as rows and
//! as the dense wall, and the node detail. Target: under 5 ms a frame.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use fleetop::tui::app::{Action, App, Wall};
use fleetop::tui::dispatch::update;
use fleetop::tui::theme::{ColorDepth, Theme};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

#[path = "support/fleet.rs"]
mod fleet;

fn frame(c: &mut Criterion) {
    let (mut store, mut collectors) = fleet::fleet();
    let now = fleet::run_for(&mut store, &mut collectors, 60);
    let theme = Theme::load("default", None, ColorDepth::TrueColor).expect("default theme");
    let mut app = App::new(store, theme, now);
    let mut group = c.benchmark_group("frame");
    for (w, h) in [(300u16, 100u16), (80, 24)] {
        let area = Rect::new(0, 0, w, h);
        update(&mut app, Action::Resize(w, h));
        for (label, wall) in [("rows", Wall::Off), ("wall", Wall::On)] {
            app.heatmap.wall = wall;
            group.bench_function(format!("1024x8 {label} {w}x{h}"), |b| {
                let mut buf = Buffer::empty(area);
                b.iter(|| {
                    buf.reset();
                    (&app).render(area, &mut buf);
                    black_box(&buf);
                })
            });
        }
    }
    update(&mut app, Action::Key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE)));
    let area = Rect::new(0, 0, 300, 100);
    group.bench_function("node detail 300x100", |b| {
        let mut buf = Buffer::empty(area);
        b.iter(|| {
            buf.reset();
            (&app).render(area, &mut buf);
            black_box(&buf);
        })
    });
    group.finish();
}

criterion_group!(benches, frame);
criterion_main!(benches);
