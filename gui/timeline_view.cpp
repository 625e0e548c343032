#include "timeline_view.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>
#include <QWheelEvent>

#include "common/units.hpp"
#include "mutants.hpp"

namespace ftplan::gui {

namespace {

constexpr int kRows = 4;  // sim::Interval::Component: gpu, cpu, nvme, nic
const char* const kRowNames[kRows] = {"GPU", "CPU", "NVMe", "NIC"};
constexpr int kActivities = 9;  // sim::Activity
const char* const kActivityNames[kActivities] = {"GEMM",        "attention", "memory-bound", "communication", "copy",
                                                 "CPU compute", "NVMe read", "NVMe write",   "idle"};
const QColor kColors[kActivities] = {QColor(31, 119, 180), QColor(44, 160, 44),  QColor(148, 103, 189),
                                     QColor(214, 39, 40),  QColor(255, 127, 14), QColor(140, 86, 75),
                                     QColor(23, 190, 207), QColor(188, 189, 34), QColor(200, 200, 200)};
constexpr int kRight = 12;
// Heights follow the font (a large or high-DPI font does not clip the title, the legend or the
// axis): a line of text, the legend's rows under the title, and the margins above and below the
// plot (the title and two legend rows; the axis labels and the shortcut's note).
int line_h(const QFontMetrics& fm) { return fm.height() + 2; }
int legend_y(const QFontMetrics& fm) { return 4 + line_h(fm); }
int top_margin(const QFontMetrics& fm) { return legend_y(fm) + 2 * line_h(fm) + 4; }
int bottom_margin(const QFontMetrics& fm) { return 6 + 2 * line_h(fm); }
// A legend swatch as tall as a capital letter, at the baseline of its name written at `y`.
int swatch(const QFontMetrics& fm) { return std::max(8, fm.capHeight()); }
// A memory strip's name (the GPU's pool is its live bytes, without the caching allocator's slack)
// and colour, by plan::Tier.
QString tier_name(std::size_t t) {
  return t == plan::tier_index(plan::Tier::gpu) ? QString("GPU (allocated)") : QString(plan::kTiers[t].label);
}
const QColor kTierColors[plan::kTierCount] = {QColor(31, 119, 180), QColor(255, 127, 14), QColor(148, 103, 189),
                                              QColor(44, 160, 44)};
// The tiers the rank has a pool for (sim::StepTracks::memory: a tier without one is empty and has
// no capacity), one strip each.
std::vector<std::size_t> strips(const sim::StepTracks& tracks) {
  std::vector<std::size_t> out;
  for (std::size_t t = 0; t < plan::kTierCount; ++t)
    if (tracks.capacity_bytes[t] > 0 || !tracks.memory[t].empty()) out.push_back(t);
  return out;
}

// A track span's colour: one per category ("compute", "h2d", "allreduce", ...), in the order of
// the categories the step has (sorted), so that no two of a step's categories share one.
const QColor kCategoryColors[] = {QColor(31, 119, 180),  QColor(214, 39, 40),   QColor(255, 127, 14),
                                  QColor(44, 160, 44),   QColor(148, 103, 189), QColor(140, 86, 75),
                                  QColor(227, 119, 194), QColor(23, 190, 207),  QColor(188, 189, 34),
                                  QColor(127, 127, 127), QColor(0, 0, 128),     QColor(128, 128, 0)};

QString seconds(double s) { return QString::fromStdString(ftplan::format_duration(s)); }

// The legend's entry for the band over the bars on the critical path, and its colour (no category's).
const std::string kCriticalPath = "critical path";
const QColor kCriticalColor(0, 0, 0);

using sim::covered_s;  // a row's busy time and its critical part

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setMinimumHeight(220);
  setBackgroundRole(QPalette::Base);
  setAutoFillBackground(true);
}

void TimelineView::set_timeline(const sim::Timeline& timeline, const QString& title, sim::StepTracks tracks) {
  timeline_ = timeline;
  title_ = title;
  tracks_ = std::move(tracks);
  const QFontMetrics fm(font());
  left_ = 60;
  for (const QString& name : row_names()) left_ = std::max(left_, fm.horizontalAdvance(name) + 12);
  if (has_tracks()) left_ = std::max(left_, fm.horizontalAdvance("peak 000.00 GiB of 000.00 GiB") + 12);
  left_ = std::min(left_, 260);
  fit();
  update();
}

int TimelineView::row_count() const {
  return has_tracks() ? static_cast<int>(tracks_.streams.size() + tracks_.links.size()) : kRows;
}

QStringList TimelineView::row_names() const {
  QStringList out;
  if (!has_tracks()) {
    for (const char* n : kRowNames) out << n;
    return out;
  }
  // Each row with the share of the step it is busy: the union of its bars (a link's flows overlap).
  const auto busy = [&](const sim::Track& t) {
    const double step = timeline_.step_s;
    return step > 0
               ? QString("%1 %2%").arg(QString::fromStdString(t.name)).arg(100 * covered_s(t, false) / step, 0, 'f', 0)
               : QString::fromStdString(t.name);
  };
  for (const auto& t : tracks_.streams) out << busy(t);
  if (!mutant("timeline_link_rows_missing"))
    for (const auto& t : tracks_.links) out << busy(t);
  return out;
}

QRectF TimelineView::plot() const {
  const QFontMetrics fm(font());
  const double all = std::max(10, height() - top_margin(fm) - bottom_margin(fm));
  // With tracks, the memory plots take the lower third, and at least a line of text per tier (at
  // 1280 x 720 a third was 9 px a tier and their names overprinted one another), up to half.
  const double tiers = static_cast<double>(std::max<std::size_t>(3, strips(tracks_).size()));
  const double memory = std::min(all / 2, std::max(all * 0.36, tiers * (line_h(fm) + 4) + 10.0));
  const double bars = has_tracks() ? all - memory : all;
  return QRectF(left_, top_margin(fm), std::max(10, width() - left_ - kRight), bars);
}

QRectF TimelineView::memory_plot() const {
  if (!has_tracks()) return {};
  const QRectF r = plot();
  return QRectF(r.left(), r.bottom() + 10, r.width(),
                std::max(10.0, height() - bottom_margin(QFontMetrics(font())) - r.bottom() - 10));
}

double TimelineView::x_of(double s) const { return plot().left() + (s - start_s_) * px_per_s_; }
double TimelineView::s_of(double x) const { return start_s_ + (x - plot().left()) / px_per_s_; }
double TimelineView::visible_s() const { return px_per_s_ > 0 ? plot().width() / px_per_s_ : 0; }

void TimelineView::fit() {
  start_s_ = 0;
  px_per_s_ = timeline_.step_s > 0 ? plot().width() / timeline_.step_s : 1;
}

void TimelineView::resizeEvent(QResizeEvent*) {
  if (start_s_ == 0) fit();
}

void TimelineView::zoom(double factor, double at_s) {
  if (timeline_.step_s <= 0) return;
  const double x = x_of(at_s);
  // No further out than the whole step, no further in than a microsecond across the plot.
  px_per_s_ = std::clamp(px_per_s_ * factor, plot().width() / timeline_.step_s, plot().width() / 1e-6);
  start_s_ = std::clamp(at_s - (x - plot().left()) / px_per_s_, 0.0, std::max(0.0, timeline_.step_s - visible_s()));
  update();
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  zoom(std::pow(1.25, event->angleDelta().y() / 120.0), s_of(event->position().x()));
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  drag_x_ = event->position().x();
  // Shift and the left button start a measurement; any other click ends the one shown.
  measuring_ =
      event->button() == Qt::LeftButton && (event->modifiers() & Qt::ShiftModifier) && !mutant("timeline_span_missing");
  span_from_s_ = measuring_ ? std::clamp(s_of(drag_x_), 0.0, timeline_.step_s) : -1;
  span_to_s_ = span_from_s_;
  if (event->button() == Qt::RightButton) fit();  // right click: the whole step again
  update();
}

void TimelineView::mouseReleaseEvent(QMouseEvent*) { measuring_ = false; }

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  const QPointF p = event->position();
  if (measuring_) {
    span_to_s_ = std::clamp(s_of(p.x()), 0.0, timeline_.step_s);
    update();
    return;
  }
  if (event->buttons() & Qt::LeftButton && drag_x_ >= 0) {
    start_s_ = std::clamp(start_s_ - (p.x() - drag_x_) / px_per_s_, 0.0, std::max(0.0, timeline_.step_s - visible_s()));
    drag_x_ = p.x();
    update();
    return;
  }
  const QString tip = tip_at(p);
  if (tip.isEmpty())
    QToolTip::hideText();
  else
    QToolTip::showText(event->globalPosition().toPoint(), tip, this);
}

// Qt's tooltip event (after the hover delay) showed the widget's fixed help over the op's figures
// a second after they appeared: over an op, a memory strip or an interval it shows those figures;
// elsewhere the help.
bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    const auto* help = static_cast<QHelpEvent*>(event);
    const QString tip = tip_at(help->pos());
    QToolTip::showText(help->globalPos(), tip.isEmpty() || mutant("timeline_tooltip_fixed_help") ? toolTip() : tip,
                       this);
    return true;
  }
  return QWidget::event(event);
}

// What the pointer is over, in words ("" over nothing).
QString TimelineView::tip_at(QPointF p) const {
  const QRectF r = plot();
  const double s = s_of(p.x());
  if (has_tracks() && memory_plot().contains(p)) {
    // The memory of each tier at this time.
    QStringList lines{seconds(s)};
    for (const std::size_t t : strips(tracks_)) {
      double live = 0;
      for (const auto& x : tracks_.memory[t])
        if (x.time_s <= s) live = x.bytes;
      lines << QString("%1: %2").arg(tier_name(t), QString::fromStdString(ftplan::format_bytes(live)));
    }
    return lines.join("\n");
  }
  const int rows = row_count();
  const int row = static_cast<int>(std::floor((p.y() - r.top()) / (r.height() / rows)));
  if (row < 0 || row >= rows || p.y() < r.top() || p.y() > r.bottom()) return {};
  if (has_tracks() && p.x() < r.left()) {
    // A row's name: its busy share, and how much of the step's critical path runs on it.
    const auto n_streams = static_cast<int>(tracks_.streams.size());
    const sim::Track& track = row < n_streams ? tracks_.streams[static_cast<std::size_t>(row)]
                                              : tracks_.links[static_cast<std::size_t>(row - n_streams)];
    const double step = timeline_.step_s;
    if (step <= 0) return QString::fromStdString(track.name);
    return QString("%1: busy %2% of the step; on the critical path %3% of it")
        .arg(QString::fromStdString(track.name))
        .arg(100 * covered_s(track, false) / step, 0, 'f', 1)
        .arg(100 * covered_s(track, true) / step, 0, 'f', 1);
  }
  if (!r.contains(p)) return {};
  if (has_tracks()) {
    const auto n_streams = static_cast<int>(tracks_.streams.size());
    const sim::Track& track = row < n_streams ? tracks_.streams[static_cast<std::size_t>(row)]
                                              : tracks_.links[static_cast<std::size_t>(row - n_streams)];
    for (const auto& sp : track.spans)
      if (sp.start_s <= s && s <= sp.end_s) {
        QString text = QString("%1\n%2 (%3): %4 to %5 (%6)")
                           .arg(QString::fromStdString(track.name), QString::fromStdString(sp.name),
                                QString::fromStdString(sp.category), seconds(sp.start_s), seconds(sp.end_s),
                                seconds(sp.end_s - sp.start_s));
        if (sp.bytes > 0) text += QString(", %1").arg(QString::fromStdString(ftplan::format_bytes(sp.bytes)));
        if (sp.critical) text += "\non the critical path: the step's end waited for it";
        return text;
      }
    return {};
  }
  for (const auto& i : timeline_.intervals)
    if (static_cast<int>(i.component) == row && i.start_s <= s && s <= i.end_s)
      return QString("%1 %2: %3 to %4 (%5)")
          .arg(kRowNames[row], kActivityNames[static_cast<int>(i.activity)], seconds(i.start_s), seconds(i.end_s),
               seconds(i.end_s - i.start_s));
  return {};
}

void TimelineView::paintEvent(QPaintEvent*) {
  drawn_ = {};
  QPainter painter(this);
  painter.setRenderHint(QPainter::Antialiasing, false);
  const QRectF r = plot();
  const QFontMetrics fm(font());
  painter.drawText(QRectF(0, 2, width(), line_h(fm)), Qt::AlignHCenter, title_);
  if (timeline_.step_s <= 0) {
    painter.drawText(r, Qt::AlignCenter, "No simulated step to show (the plan does not fit, or is a search's).");
    return;
  }
  if (has_tracks()) {
    paint_tracks(painter);
  } else {
    paint_components(painter);
  }
  // Time axis: about eight ticks at round values, all in the one unit the visible span reads best
  // in (a span of 200 s ticks 0, 0.5 ... 3 min, not "50.00 s" beside "2.5 min").
  const QRectF axis = has_tracks() ? memory_plot() : r;
  const double span = visible_s();
  const auto [unit_s, unit] = span < 2e-3   ? std::pair{1e-6, "µs"}
                              : span < 2    ? std::pair{1e-3, "ms"}
                              : span < 120  ? std::pair{1.0, "s"}
                              : span < 7200 ? std::pair{60.0, "min"}
                                            : std::pair{3600.0, "h"};
  const double raw = span / unit_s / 8;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double step = (raw / mag < 2 ? 2 * mag : raw / mag < 5 ? 5 * mag : 10 * mag) * unit_s;
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step / unit_s) + 1e-9)));
  painter.drawLine(QPointF(axis.left(), axis.bottom()), QPointF(axis.right(), axis.bottom()));
  for (double t = std::ceil(start_s_ / step) * step; t <= start_s_ + span + 1e-12; t += step) {
    const double x = x_of(t);
    painter.drawLine(QPointF(x, axis.bottom()), QPointF(x, axis.bottom() + 4));
    const QString label = QString("%1 %2").arg(t / unit_s, 0, 'f', decimals).arg(QString::fromUtf8(unit));
    // Labels at the ends stay inside the widget.
    const double left = std::clamp(x - 50, 0.0, std::max(0.0, width() - 100.0));
    const Qt::Alignment align = left > x - 50 ? Qt::AlignLeft : left < x - 50 ? Qt::AlignRight : Qt::AlignHCenter;
    painter.drawText(QRectF(left, axis.bottom() + 5, 100, line_h(fm)), align, label);
  }
  paint_span(painter);
  if (!timeline_.partials.empty() && !has_tracks())
    painter.drawText(QRectF(0, height() - line_h(fm), width(), line_h(fm)), Qt::AlignHCenter,
                     QString("the simulated part of the step (steady-state shortcut); the whole step: %1")
                         .arg(seconds(timeline_.whole_step_s())));
}

// The measured span: a band over the bars and memory strips between its ends, its length on top.
void TimelineView::paint_span(QPainter& painter) {
  if (span_from_s_ < 0) return;
  const double a = std::min(span_from_s_, span_to_s_), b = std::max(span_from_s_, span_to_s_);
  const QRectF r = plot();
  const double bottom = has_tracks() ? memory_plot().bottom() : r.bottom();
  const QRectF band(x_of(a), r.top(), std::max(1.0, x_of(b) - x_of(a)), bottom - r.top());
  painter.fillRect(band, QColor(255, 200, 0, 60));
  painter.setPen(QColor(160, 110, 0));
  painter.drawLine(band.topLeft(), band.bottomLeft());
  painter.drawLine(band.topRight(), band.bottomRight());
  const QString label = QString::fromUtf8("\u0394 ") + QString::fromStdString(ftplan::format_duration(b - a));
  const QFontMetrics fm(font());
  const double w = fm.horizontalAdvance(label) + 8;
  const QRectF box(std::clamp(band.center().x() - w / 2, 0.0, std::max(0.0, width() - w)), r.top() - line_h(fm) - 1, w,
                   line_h(fm));
  painter.fillRect(box, QColor(255, 240, 200));
  painter.drawText(box, Qt::AlignCenter, label);
  painter.setPen(palette().color(QPalette::Text));
  drawn_.span = label;
}

// A row per stream, then per link; a bar per op or flow, coloured by its category. Under them,
// each tier's live bytes over the step as a step line against its capacity (dashed).
void TimelineView::paint_tracks(QPainter& painter) {
  const QRectF r = plot();
  const QFontMetrics fm(font());
  std::set<std::string> categories;
  for (const auto* group : {&tracks_.streams, &tracks_.links})
    for (const auto& t : *group)
      for (const auto& sp : t.spans) categories.insert(sp.category);
  std::map<std::string, QColor> color;
  for (const auto& c : categories) color[c] = kCategoryColors[color.size() % std::size(kCategoryColors)];
  const auto category_color = [&](const std::string& c) { return color[c]; };
  // The legend from the left edge, on a second row where the first is full (eleven categories of
  // a tiered step did not fit one row beside the row names: "marker" and "optimizer" went unnamed).
  // The critical path's band last, where the step has one.
  bool any_critical = false;
  for (const auto* group : {&tracks_.streams, &tracks_.links})
    for (const auto& t : *group)
      for (const auto& sp : t.spans) any_critical = any_critical || sp.critical;
  std::vector<std::string> entries(categories.begin(), categories.end());
  if (any_critical) entries.push_back(kCriticalPath);
  const double first_row = legend_y(fm), sw = swatch(fm);
  double lx = 8, ly = first_row;
  for (const auto& c : entries) {
    const QString name = QString::fromStdString(c);
    if (lx + 2 * sw + 4 + fm.horizontalAdvance(name) > width()) {
      if (ly > first_row || mutant("timeline_legend_one_row")) break;
      lx = 8, ly += line_h(fm);
    }
    // The swatch's bottom on the name's baseline.
    const QRectF box(lx, ly + fm.ascent() - sw, sw, sw);
    if (c == kCriticalPath) {
      painter.fillRect(QRectF(box.left(), box.top(), box.width(), 4), kCriticalColor);
    } else {
      painter.fillRect(box, category_color(c));
      drawn_.legend << name;
    }
    painter.drawText(QPointF(lx + sw + 4, ly + fm.ascent()), name);
    lx += 2 * sw + 4 + fm.horizontalAdvance(name);
  }
  const QStringList names = row_names();
  const int rows = row_count();
  const double row_h = r.height() / rows;
  const auto n_streams = static_cast<int>(tracks_.streams.size());
  // Rows lower than a line of text name every k-th row (hover names the rest): at 1280 x 720, the
  // sixteen rows of a tiered step were 5 px apart and their names overprinted one another.
  const int every = std::max(1, static_cast<int>(std::ceil(fm.height() / row_h)));
  for (int row = 0; row < rows; ++row) {
    painter.setPen(row < n_streams ? palette().color(QPalette::Text) : QColor(90, 90, 140));
    if (row % every == 0)
      painter.drawText(QRectF(0, r.top() + row * row_h, left_ - 6, std::max(row_h, fm.height() + 0.0)),
                       Qt::AlignRight | Qt::AlignTop, fm.elidedText(names[row], Qt::ElideLeft, left_ - 8));
    painter.setPen(row + 1 == n_streams ? QColor(150, 150, 150) : QColor(225, 225, 225));
    painter.drawLine(QPointF(r.left(), r.top() + (row + 1) * row_h), QPointF(r.right(), r.top() + (row + 1) * row_h));
  }
  painter.setPen(palette().color(QPalette::Text));
  painter.save();
  painter.setClipRect(r);
  for (int row = 0; row < rows; ++row) {
    const sim::Track& track = row < n_streams ? tracks_.streams[static_cast<std::size_t>(row)]
                                              : tracks_.links[static_cast<std::size_t>(row - n_streams)];
    for (const auto& sp : track.spans) {
      const double x0 = x_of(sp.start_s), x1 = x_of(sp.end_s);
      if (x1 < r.left() || x0 > r.right()) continue;
      const QRectF bar(x0, r.top() + row * row_h + 2, std::max(1.0, x1 - x0), std::max(1.0, row_h - 4));
      const QColor fill = category_color(sp.category);
      painter.fillRect(bar, fill);
      if (sp.critical && !mutant("timeline_critical_path_missing")) {
        // A black band along the bar's top (no category is black): over a row at a glance, where
        // the step waited on it; the bar's own colour stays readable under it.
        painter.fillRect(QRectF(bar.left(), bar.top() - 2, bar.width(), std::min(4.0, bar.height() / 3 + 2)),
                         kCriticalColor);
        ++drawn_.critical_bars;
      }
      // Zoomed in far enough, a bar names its op or flow (the part of it on screen).
      const QRectF shown = bar.intersected(r).adjusted(3, 0, -3, 0);
      const QString name = QString::fromStdString(sp.name);
      if (shown.width() >= fm.horizontalAdvance(name.left(6)) + 2 && !mutant("timeline_op_names_missing")) {
        painter.setPen(fill.lightness() < 140 ? Qt::white : Qt::black);
        painter.drawText(shown, Qt::AlignLeft | Qt::AlignVCenter,
                         fm.elidedText(name, Qt::ElideRight, static_cast<int>(shown.width())));
        ++drawn_.named_bars;
      }
    }
  }
  painter.restore();
  // Memory per tier: a strip for each pool of the rank, each scaled to its peak.
  const QRectF m = memory_plot();
  const std::vector<std::size_t> shown = strips(tracks_);
  const double strip = m.height() / static_cast<double>(std::max<std::size_t>(1, shown.size()));
  for (std::size_t k = 0; k < shown.size(); ++k) {
    const std::size_t t = shown[k];
    const QRectF band(m.left(), m.top() + static_cast<double>(k) * strip + 2, m.width(), strip - 4);
    const auto& series = tracks_.memory[t];
    double peak = 0;
    for (const auto& x : series) peak = std::max(peak, x.bytes);
    // Scaled to the peak (how the tier fills and drains over the step), the capacity named, and
    // drawn where it is within reach.
    const double capacity = tracks_.capacity_bytes[t];
    const double top = peak > 0 ? peak * 1.15 : capacity;
    painter.setPen(QColor(225, 225, 225));
    painter.drawRect(band);
    painter.setPen(palette().color(QPalette::Text));
    // The tier's name, and its peak and capacity where the strip has room for a second line
    // (hover reads them otherwise).
    const QString figures = QString("peak %1 of %2")
                                .arg(QString::fromStdString(ftplan::format_bytes(peak)),
                                     QString::fromStdString(ftplan::format_bytes(capacity)));
    painter.drawText(QRectF(0, band.top(), left_ - 6, band.height()), Qt::AlignRight | Qt::AlignVCenter,
                     band.height() >= 2 * fm.height() ? tier_name(t) + "\n" + figures : tier_name(t));
    if (peak <= 0) {
      painter.drawText(band, Qt::AlignCenter, "nothing of the step is kept here");
      continue;
    }
    if (mutant("timeline_memory_strips_not_drawn")) continue;
    const auto y_of = [&](double bytes) { return band.bottom() - bytes / top * band.height(); };
    painter.save();
    painter.setClipRect(band);
    if (capacity > 0 && capacity <= top && !mutant("timeline_capacity_line_missing")) {
      QPen dashed(QColor(200, 40, 40));
      dashed.setStyle(Qt::DashLine);
      painter.setPen(dashed);
      painter.drawLine(QPointF(band.left(), y_of(capacity)), QPointF(band.right(), y_of(capacity)));
      ++drawn_.capacity_lines;
    }
    QPainterPath path;
    double last = 0;
    path.moveTo(x_of(0), y_of(0));
    for (const auto& x : series) {
      path.lineTo(x_of(x.time_s), y_of(last));
      path.lineTo(x_of(x.time_s), y_of(x.bytes));
      last = x.bytes;
    }
    path.lineTo(x_of(std::max(timeline_.step_s, series.empty() ? 0.0 : series.back().time_s)), y_of(last));
    QPen line(kTierColors[t]);
    line.setWidthF(1.5);
    painter.setPen(line);
    painter.drawPath(path);
    ++drawn_.memory_curves;
    painter.restore();
  }
}

void TimelineView::paint_components(QPainter& painter) {
  const QRectF r = plot();
  // Legend: the activities this step has.
  bool used[kActivities] = {};
  for (const auto& i : timeline_.intervals) used[static_cast<int>(i.activity)] = true;
  double lx = left_;
  const QFontMetrics fm(font());
  for (int a = 0; a < kActivities; ++a) {
    if (!used[a]) continue;
    const double sw = swatch(fm), y = legend_y(fm) + fm.ascent();
    painter.fillRect(QRectF(lx, y - sw, sw, sw), kColors[a]);
    painter.drawText(QPointF(lx + sw + 4, y), kActivityNames[a]);
    lx += 2 * sw + 4 + fm.horizontalAdvance(kActivityNames[a]);
  }
  const double row_h = r.height() / kRows;
  for (int row = 0; row < kRows; ++row) {
    painter.drawText(QRectF(0, r.top() + row * row_h, left_ - 6, row_h), Qt::AlignRight | Qt::AlignVCenter,
                     kRowNames[row]);
    painter.setPen(QColor(225, 225, 225));
    painter.drawLine(QPointF(r.left(), r.top() + (row + 1) * row_h), QPointF(r.right(), r.top() + (row + 1) * row_h));
    painter.setPen(palette().color(QPalette::Text));
  }
  painter.save();
  painter.setClipRect(r);
  for (const auto& i : timeline_.intervals) {
    const double x0 = x_of(i.start_s), x1 = x_of(i.end_s);
    if (x1 < r.left() || x0 > r.right()) continue;
    const int row = static_cast<int>(i.component);
    // At least a pixel wide: a short kernel is still seen.
    painter.fillRect(QRectF(x0, r.top() + row * row_h + 3, std::max(1.0, x1 - x0), row_h - 6),
                     kColors[static_cast<int>(i.activity)]);
  }
  painter.restore();
}

}  // namespace ftplan::gui
