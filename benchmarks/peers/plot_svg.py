"""A small SVG line plot (log2 x, log10 y) for benchmarks/compare; no matplotlib needed."""
import math

COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
          "#bcbd22", "#393b79", "#637939"]


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def plot(path, title, series, ylabel="bus bandwidth (GB/s)"):
    """series: list of (label, dashed, [(x_bytes, y)]); points with y <= 0 are skipped."""
    W, H, L, R, T, B = 900, 560, 70, 230, 40, 50
    pts = [(x, y) for _, _, s in series for x, y in s if y > 0 and x > 0]
    if not pts:
        return
    x0, x1 = math.log2(min(p[0] for p in pts)), math.log2(max(p[0] for p in pts))
    y0, y1 = math.floor(math.log10(min(p[1] for p in pts))), math.ceil(math.log10(max(p[1] for p in pts)))
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1

    def sx(x):
        return L + (math.log2(x) - x0) / (x1 - x0) * (W - L - R)

    def sy(y):
        return H - B - (math.log10(y) - y0) / (y1 - y0) * (H - T - B)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2 - R / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    for e in range(y0, y1 + 1):
        y = sy(10 ** e)
        out.append(f'<line x1="{L}" y1="{y:.1f}" x2="{W - R}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end">{10 ** e:g}</text>')
    xs = sorted({p[0] for p in pts})
    for x in xs:
        out.append(f'<line x1="{sx(x):.1f}" y1="{T}" x2="{sx(x):.1f}" y2="{H - B}" stroke="#eee"/>')
        out.append(f'<text x="{sx(x):.1f}" y="{H - B + 16}" text-anchor="middle">{human(x)}</text>')
    out.append(f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="black"/>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 10}" text-anchor="middle">message size (bytes)</text>')
    out.append(f'<text x="16" y="{(T + H - B) / 2}" text-anchor="middle" transform="rotate(-90 16 {(T + H - B) / 2})">'
               f'{ylabel}</text>')
    for i, (label, dashed, s) in enumerate(series):
        c = COLORS[i % len(COLORS)]
        good = [(x, y) for x, y in s if y > 0 and x > 0]
        if good:
            d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in good)
            dash = ' stroke-dasharray="6,4"' if dashed else ""
            out.append(f'<polyline points="{d}" fill="none" stroke="{c}" stroke-width="2"{dash}/>')
            for x, y in good:
                out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="2.5" fill="{c}"/>')
        ly = T + 14 + 18 * i
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        out.append(f'<line x1="{W - R + 12}" y1="{ly - 4}" x2="{W - R + 40}" y2="{ly - 4}" stroke="{c}" stroke-width="2"{dash}/>')
        out.append(f'<text x="{W - R + 46}" y="{ly}">{label}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
