#!/usr/bin/env python3
"""Render a `tmux capture-pane -e -p` dump (text with ANSI SGR escapes) as a PNG.

The image is a fixed COLS x ROWS cell grid drawn with DejaVu Sans Mono, so it
looks like the terminal the capture came from.  SGR attributes (bold, dim,
italic, underline, reverse, strikethrough) and 16/256/24-bit colours are
honoured; every other escape sequence is skipped.  Box-drawing lines, block
elements, shades and braille are drawn geometrically so that they tile with no
gaps; everything else goes through the font.

    ansi2png.py INPUT.ans OUTPUT.png --cols 120 --rows 36 [--font-size 14] [--title TEXT]

INPUT may be '-' for stdin.  Bytes that are not UTF-8 become U+FFFD.
"""
import argparse
import dataclasses
import os
import re
import subprocess
import sys
import unicodedata

from PIL import Image, ImageDraw, ImageFont

DEFAULT_FG = "#c5c8c6"
DEFAULT_BG = "#1d1f21"
TITLE_BG = "#2b2d30"
PADDING = 8
FONT_DIR = "/usr/share/fonts/truetype/dejavu"
FONT_STYLES = {  # (bold, italic) -> (fontconfig style, Debian file name)
    (False, False): ("Book", "DejaVuSansMono.ttf"),
    (True, False): ("Bold", "DejaVuSansMono-Bold.ttf"),
    (False, True): ("Oblique", "DejaVuSansMono-Oblique.ttf"),
    (True, True): ("Bold Oblique", "DejaVuSansMono-BoldOblique.ttf"),
}
XTERM16 = [
    (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0),
    (0, 0, 238), (205, 0, 205), (0, 205, 205), (229, 229, 229),
    (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0),
    (92, 92, 255), (255, 0, 255), (0, 255, 255), (255, 255, 255),
]
CUBE_LEVELS = (0, 95, 135, 175, 215, 255)

# Box drawing: char -> (left, right, up, down) weights, 0 none, 1 light, 2 heavy.
BOX = {
    "─": (1, 1, 0, 0), "━": (2, 2, 0, 0), "│": (0, 0, 1, 1), "┃": (0, 0, 2, 2),
    "┌": (0, 1, 0, 1), "┍": (0, 2, 0, 1), "┎": (0, 1, 0, 2), "┏": (0, 2, 0, 2),
    "┐": (1, 0, 0, 1), "┑": (2, 0, 0, 1), "┒": (1, 0, 0, 2), "┓": (2, 0, 0, 2),
    "└": (0, 1, 1, 0), "┕": (0, 2, 1, 0), "┖": (0, 1, 2, 0), "┗": (0, 2, 2, 0),
    "┘": (1, 0, 1, 0), "┙": (2, 0, 1, 0), "┚": (1, 0, 2, 0), "┛": (2, 0, 2, 0),
    "├": (0, 1, 1, 1), "┣": (0, 2, 2, 2), "┤": (1, 0, 1, 1), "┫": (2, 0, 2, 2),
    "┬": (1, 1, 0, 1), "┳": (2, 2, 0, 2), "┴": (1, 1, 1, 0), "┻": (2, 2, 2, 0),
    "┼": (1, 1, 1, 1), "╋": (2, 2, 2, 2),
    "╴": (1, 0, 0, 0), "╵": (0, 0, 1, 0), "╶": (0, 1, 0, 0), "╷": (0, 0, 0, 1),
    "╸": (2, 0, 0, 0), "╹": (0, 0, 2, 0), "╺": (0, 2, 0, 0), "╻": (0, 0, 0, 2),
}
ROUNDED = {"╭": (0, 1, 0, 1), "╮": (1, 0, 0, 1), "╯": (1, 0, 1, 0), "╰": (0, 1, 1, 0)}
_Q = {"TL": (0, 0, .5, .5), "TR": (.5, 0, 1, .5), "BL": (0, .5, .5, 1), "BR": (.5, .5, 1, 1)}
# Block elements: char -> rectangles as cell fractions (x0, y0, x1, y1).
BLOCKS = {
    "█": [(0, 0, 1, 1)], "▀": [(0, 0, 1, .5)], "▐": [(.5, 0, 1, 1)],
    "▔": [(0, 0, 1, 1 / 8)], "▕": [(7 / 8, 0, 1, 1)],
    **{chr(0x2580 + n): [(0, 1 - n / 8, 1, 1)] for n in range(1, 8)},   # ▁..▇
    **{chr(0x2590 - n): [(0, 0, n / 8, 1)] for n in range(1, 8)},       # ▏..▉
    **{ch: [_Q[q] for q in qs.split()] for ch, qs in {
        "▖": "BL", "▗": "BR", "▘": "TL", "▙": "TL BL BR", "▚": "TL BR",
        "▛": "TL TR BL", "▜": "TL TR BR", "▝": "TR", "▞": "TR BL", "▟": "TR BL BR"}.items()},
}
SHADES = {"░": 0.25, "▒": 0.5, "▓": 0.75}
# Braille dot bit -> (column, row) in the 2x4 dot grid.
BRAILLE_DOTS = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (0, 3), (1, 3)]

TOKEN_RE = re.compile(
    r"\x1b\[(?P<csi>[0-?]*)[ -/]*(?P<final>[@-~])"   # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"           # OSC
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"                # DCS, SOS, PM, APC
    r"|\x1b.?"                                        # any other escape
    r"|(?P<text>[^\x1b]+)",
    re.S,
)


@dataclasses.dataclass(frozen=True)
class Style:
    fg: tuple = None  # None means the default colour
    bg: tuple = None
    bold: bool = False
    dim: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    strike: bool = False


def xterm_color(n):
    """RGB for xterm 256-colour index n."""
    n = max(0, min(255, n))
    if n < 16:
        return XTERM16[n]
    if n < 232:
        n -= 16
        return tuple(CUBE_LEVELS[v] for v in (n // 36, n // 6 % 6, n % 6))
    grey = 8 + 10 * (n - 232)
    return (grey, grey, grey)


def to_int(text, default=0):
    try:
        return int(text)
    except ValueError:
        return default


def clamp(v):
    return max(0, min(255, v))


def extended_color(args):
    """Parse the numbers after 38/48: [5, n] or [2, r, g, b]; return (colour, count used)."""
    if args[:1] == [5] and len(args) >= 2:
        return xterm_color(args[1]), 2
    if args[:1] == [2] and len(args) >= 4:
        return tuple(clamp(v) for v in args[1:4]), 4
    return None, len(args[:1])


def apply_sgr(params, style):
    """Return style updated by one SGR parameter string such as '1;38;5;208'."""
    parts = params.split(";") if params else ["0"]
    i = 0
    while i < len(parts):
        if ":" in parts[i]:  # ITU colon form: 38:2::r:g:b, 38:5:n, 4:3
            sub = [to_int(s, 0) for s in parts[i].split(":")]
            code, args, i = sub[0], sub[1:], i + 1
            if code in (38, 48) and args[:1] == [2] and len(args) >= 5:  # with colour space id
                color = tuple(clamp(v) for v in args[2:5])
            elif code in (38, 48):
                color = extended_color(args)[0]
            elif code == 4:
                style = dataclasses.replace(style, underline=bool(args and args[0]))
                continue
            else:
                continue
            style = dataclasses.replace(style, **{"fg" if code == 38 else "bg": color})
            continue
        code = to_int(parts[i] or "0", -1)
        i += 1
        if code in (38, 48, 58):
            color, used = extended_color([to_int(p, 0) for p in parts[i:i + 4]])
            i += used
            if code != 58:
                style = dataclasses.replace(style, **{"fg" if code == 38 else "bg": color})
        elif code == 0:
            style = Style()
        else:
            style = dataclasses.replace(style, **sgr_simple(code))
    return style


def sgr_simple(code):
    """Field changes for a single-number SGR code (unknown codes change nothing)."""
    flags = {1: {"bold": True}, 2: {"dim": True}, 3: {"italic": True}, 4: {"underline": True},
             7: {"reverse": True}, 9: {"strike": True}, 21: {"underline": True},
             22: {"bold": False, "dim": False}, 23: {"italic": False},
             24: {"underline": False}, 27: {"reverse": False}, 29: {"strike": False},
             39: {"fg": None}, 49: {"bg": None}}
    if code in flags:
        return flags[code]
    for base, offset, key in ((30, 0, "fg"), (40, 0, "bg"), (90, 8, "fg"), (100, 8, "bg")):
        if base <= code <= base + 7:
            return {key: xterm_color(code - base + offset)}
    return {}


def parse(text, cols, rows):
    """Turn captured text into a rows x cols grid of (str, Style); '' marks a wide char's tail."""
    grid = [[(" ", Style()) for _ in range(cols)] for _ in range(rows)]
    style, row, col = Style(), 0, 0
    for match in TOKEN_RE.finditer(text):
        if match.group("final") == "m" and not match.group("csi")[:1] in ("<", "=", ">", "?"):
            style = apply_sgr(match.group("csi"), style)
        if match.group("text") is None:
            continue
        for ch in match.group("text"):
            if ch == "\n":
                row, col = row + 1, 0
            elif ch == "\r":
                col = 0
            elif ch == "\t":
                col = min(cols, (col // 8 + 1) * 8)
            elif unicodedata.category(ch) in ("Cc", "Cs") or row >= rows:
                continue
            elif unicodedata.combining(ch) or ch in "\u200d\ufe0f":
                if 0 < col <= cols:
                    prev, prev_style = grid[row][col - 1]
                    grid[row][col - 1] = (prev + ch, prev_style)
            else:
                width = 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
                if col + width <= cols:
                    grid[row][col] = (ch, style)
                    if width == 2:
                        grid[row][col + 1] = ("", style)
                col += width
    return grid


def find_font(bold, italic):
    """Path of DejaVu Sans Mono in the wanted style, or None."""
    style, name = FONT_STYLES[(bold, italic)]
    try:
        out = subprocess.run(["fc-match", "-f", "%{file}", f"DejaVu Sans Mono:style={style}"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        if out.endswith(name) and os.path.exists(out):
            return out
    except (OSError, subprocess.SubprocessError):
        pass
    path = os.path.join(FONT_DIR, name)
    return path if os.path.exists(path) else None


def parse_hex(color):
    color = color.lstrip("#")
    if len(color) != 6:
        raise argparse.ArgumentTypeError(f"expected #rrggbb, got {color!r}")
    return tuple(int(color[i:i + 2], 16) for i in (0, 2, 4))


def blend(a, b, t):
    """Mix colour a toward b by fraction t."""
    return tuple(round(x + (y - x) * t) for x, y in zip(a, b))


class Renderer:
    """Draws a parsed grid onto a Pillow image."""

    def __init__(self, font_size, default_fg, default_bg):
        regular = find_font(False, False)
        if regular is None:
            sys.exit("ansi2png: DejaVu Sans Mono not found (apt-get install fonts-dejavu-core)")
        self.fonts = {}
        for key in FONT_STYLES:
            self.fonts[key] = ImageFont.truetype(find_font(*key) or regular, font_size)
        base = self.fonts[(False, False)]
        self.ascent, descent = base.getmetrics()
        self.cw = max(1, round(base.getlength("M")))
        self.ch = self.ascent + descent
        self.thin = max(1, round(font_size / 14))
        self.thick = self.thin * 2 + 1
        self.fg, self.bg = default_fg, default_bg

    def colors(self, style):
        fg, bg = style.fg or self.fg, style.bg or self.bg
        if style.reverse:
            fg, bg = bg, fg
        if style.dim:
            fg = blend(fg, bg, 0.5)
        return fg, bg

    def render(self, grid, title=None):
        rows, cols = len(grid), len(grid[0]) if grid else 0
        top = self.ch + 2 * PADDING if title else 0
        size = (cols * self.cw + 2 * PADDING, top + rows * self.ch + 2 * PADDING)
        img = Image.new("RGB", size, self.bg)
        draw = ImageDraw.Draw(img)
        if title:
            self.title_bar(draw, size[0], top, title)
        for r, line in enumerate(grid):
            for c, (text, style) in enumerate(line):
                x, y = PADDING + c * self.cw, top + PADDING + r * self.ch
                self.cell(draw, x, y, text, style)
        return img

    def title_bar(self, draw, width, height, title):
        draw.rectangle([0, 0, width - 1, height - 1], fill=TITLE_BG)
        radius, cy = max(3, self.ch // 4), height // 2
        for i, color in enumerate(("#ff5f56", "#ffbd2e", "#27c93f")):
            cx = PADDING + radius + i * (3 * radius)
            draw.ellipse([cx - radius, cy - radius, cx + radius, cy + radius], fill=color)
        font = self.fonts[(True, False)]
        draw.text((width // 2, cy), title, font=font, fill=self.fg, anchor="mm")

    def cell(self, draw, x, y, text, style):
        fg, bg = self.colors(style)
        if bg != self.bg:
            draw.rectangle([x, y, x + self.cw - 1, y + self.ch - 1], fill=bg)
        if not text or text == " ":
            pass
        elif text in BOX or text in ROUNDED:
            self.box(draw, x, y, text, fg)
        elif text in BLOCKS:
            for fx0, fy0, fx1, fy1 in BLOCKS[text]:
                self.rect(draw, x, y, fx0, fy0, fx1, fy1, fg)
        elif text in SHADES:
            self.rect(draw, x, y, 0, 0, 1, 1, blend(bg, fg, SHADES[text]))
        elif "\u2800" <= text[0] <= "\u28ff":
            self.braille(draw, x, y, ord(text[0]) - 0x2800, fg)
        else:
            font = self.fonts[(style.bold, style.italic)]
            draw.text((x, y + self.ascent), text, font=font, fill=fg, anchor="ls")
        if style.underline:
            uy = y + self.ascent + 1
            draw.rectangle([x, uy, x + self.cw - 1, uy + self.thin - 1], fill=fg)
        if style.strike:
            sy = y + self.ch // 2
            draw.rectangle([x, sy, x + self.cw - 1, sy + self.thin - 1], fill=fg)

    def rect(self, draw, x, y, fx0, fy0, fx1, fy1, color):
        x0, x1 = x + round(fx0 * self.cw), x + round(fx1 * self.cw) - 1
        y0, y1 = y + round(fy0 * self.ch), y + round(fy1 * self.ch) - 1
        if x1 >= x0 and y1 >= y0:
            draw.rectangle([x0, y0, x1, y1], fill=color)

    def box(self, draw, x, y, ch, color):
        """Lines from the cell's edges to its centre, joined by a centre square."""
        if ch in ROUNDED:
            self.arc(draw, x, y, ch, color)
            return
        left, right, up, down = BOX[ch]
        width = {0: 0, 1: self.thin, 2: self.thick}
        big = max(width[w] for w in (left, right, up, down))
        cx0, cy0 = x + self.cw // 2 - big // 2, y + self.ch // 2 - big // 2
        cx1, cy1 = cx0 + big - 1, cy0 + big - 1
        x_end, y_end = x + self.cw - 1, y + self.ch - 1
        for weight, (x0, x1, horizontal) in ((left, (x, cx1, True)), (right, (cx0, x_end, True)),
                                             (up, (y, cy1, False)), (down, (cy0, y_end, False))):
            t = width[weight]
            if not t:
                continue
            if horizontal:
                yy = y + self.ch // 2 - t // 2
                draw.rectangle([x0, yy, x1, yy + t - 1], fill=color)
            else:
                xx = x + self.cw // 2 - t // 2
                draw.rectangle([xx, x0, xx + t - 1, x1], fill=color)

    def arc(self, draw, x, y, ch, color):
        """A rounded corner: a quarter circle joining two half lines."""
        left, right, up, down = ROUNDED[ch]
        t, r = self.thin, max(1, self.cw // 2 - 1)
        mx, my = x + self.cw // 2 - t // 2, y + self.ch // 2 - t // 2
        ox = mx - r if left else mx + r    # circle centre
        oy = my - r if up else my + r
        start = {(0, 0): 180, (1, 0): 270, (1, 1): 0, (0, 1): 90}[(left, up)]
        draw.arc([ox - r, oy - r, ox + r + t - 1, oy + r + t - 1], start, start + 90,
                 fill=color, width=t)
        hx0, hx1 = (x, ox) if left else (ox, x + self.cw - 1)
        vy0, vy1 = (y, oy) if up else (oy, y + self.ch - 1)
        if hx0 <= hx1:
            draw.rectangle([hx0, my, hx1, my + t - 1], fill=color)
        if vy0 <= vy1:
            draw.rectangle([mx, vy0, mx + t - 1, vy1], fill=color)

    def braille(self, draw, x, y, bits, color):
        dot = max(1, round(self.cw / 4))
        for bit, (dc, dr) in enumerate(BRAILLE_DOTS):
            if bits & (1 << bit):
                px = x + round((dc + 0.5) * self.cw / 2) - dot // 2
                py = y + round((dr + 0.5) * self.ch / 4) - dot // 2
                draw.rectangle([px, py, px + dot - 1, py + dot - 1], fill=color)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", help="capture file ('-' for stdin)")
    ap.add_argument("output", help="PNG to write")
    ap.add_argument("--cols", type=int, required=True)
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--font-size", type=int, default=14)
    ap.add_argument("--title", help="draw a window title bar with this text")
    ap.add_argument("--default-fg", type=parse_hex, default=parse_hex(DEFAULT_FG))
    ap.add_argument("--default-bg", type=parse_hex, default=parse_hex(DEFAULT_BG))
    args = ap.parse_args(argv)
    if args.cols < 1 or args.rows < 1 or args.font_size < 4:
        ap.error("--cols and --rows must be positive and --font-size at least 4")
    if args.input == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(args.input, "rb") as f:
            data = f.read()
    grid = parse(data.decode("utf-8", errors="replace"), args.cols, args.rows)
    renderer = Renderer(args.font_size, args.default_fg, args.default_bg)
    renderer.render(grid, args.title).save(args.output, "PNG")


if __name__ == "__main__":
    main()
