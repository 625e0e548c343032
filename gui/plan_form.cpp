#include "plan_form.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <string_view>

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>

#include <fmt/format.h>

#include "common/enum_names.hpp"
#include "common/strings.hpp"
#include "plan/checks.hpp"
#include "words.hpp"

namespace ftplan::gui {

PlanForm::PlanForm(const hardware::Catalog& catalog, QWidget* parent)
    : QGroupBox("Plan (edits are written into its text)", parent) {
  setObjectName("plan_box");
  auto* plan_form = new QFormLayout(this);
  const auto spin = [&](const char* name, int lo, int hi, const char* special = nullptr) {
    auto* b = new QSpinBox;
    b->setObjectName(name);
    b->setRange(lo, hi);
    if (special) b->setSpecialValueText(special);
    return b;
  };
  const auto combo = [&](const char* name, const std::vector<std::string>& items) {
    auto* c = new QComboBox;
    c->setObjectName(name);
    for (const auto& i : items) c->addItem(q(i));
    return c;
  };
  plan_pick_ = new QComboBox;
  plan_pick_->setObjectName("plan_pick");
  gpu_ = combo("gpu", catalog.gpu_names());
  node_ = combo("node", catalog.node_names());
  gpus_ = spin("gpus", 1, plan::kMaxGpus);
  tp_ = spin("tp", 1, 1024);
  pp_ = spin("pp", 1, 1024);
  dp_ = spin("dp", 0, plan::kMaxGpus, "auto");
  cp_ = spin("cp", 1, 1024);
  zero_ = spin("zero", 0, 3);
  offload_ = new QComboBox;
  offload_->setObjectName("offload");
  offload_->addItems(choices<plan::OffloadPreset>());
  offload_->setToolTip(
      "Writes offload.preset: the preset's placements replace any written by hand; the block's other settings "
      "stay where the new placements use them (what they have no use for is left out, and said).");
  dram_ = spin("dram", 1, 1 << 20);
  dram_->setSuffix(" GiB");
  dram_->setToolTip("Host DRAM per node (cluster.dram)");
  auto* layout_row = new QHBoxLayout;
  for (auto [label, box] : {std::pair{"tp", tp_}, std::pair{"pp", pp_}, std::pair{"dp", dp_}, std::pair{"cp", cp_},
                            std::pair{"ZeRO", zero_}}) {
    layout_row->addWidget(new QLabel(label));
    layout_row->addWidget(box);
  }
  auto* gpu_row = new QHBoxLayout;
  gpu_row->addWidget(gpu_, 1);
  gpu_row->addWidget(new QLabel("×"));
  gpu_row->addWidget(gpus_);
  plan_form->addRow("plan", plan_pick_);
  plan_form->addRow("GPU", gpu_row);
  plan_form->addRow("node", node_);
  plan_form->addRow("layout", layout_row);
  plan_form->addRow("offload", offload_);
  plan_form->addRow("DRAM per node", dram_);
  // A node's devices of each kind that backs a tier: the catalog's names (or none) and how many.
  plan::for_each_device_kind([&](const auto& kind) {
    if (!kind.tier) return;
    std::vector<std::string> names = hardware::names_of(catalog.*kind.in_catalog);
    names.insert(names.begin(), "(none)");
    DeviceRow d{kind.key, kind.item, combo(kind.item, names), spin(fmt::format("{}_count", kind.item).c_str(), 0, 64)};
    d.count->setToolTip(q(fmt::format("{}s per node (cluster.{})", kind.what, kind.key)));
    auto* row = new QHBoxLayout;
    row->addWidget(d.pick, 1);
    row->addWidget(new QLabel("×"));
    row->addWidget(d.count);
    plan_form->addRow(q(fmt::format("{}s per node", kind.what)), row);
    device_rows_.push_back(d);
  });
  setEnabled(false);
  connect(plan_pick_, &QComboBox::currentIndexChanged, this, [this] { fill(); });
  std::vector<QComboBox*> picks = {gpu_, node_, offload_};
  std::vector<QSpinBox*> counts = {gpus_, tp_, pp_, dp_, cp_, zero_, dram_};
  for (const DeviceRow& d : device_rows_) picks.push_back(d.pick), counts.push_back(d.count);
  for (QComboBox* c : picks) connect(c, &QComboBox::activated, this, [this, c] { changed(c); });
  for (QSpinBox* b : counts) {
    b->setKeyboardTracking(false);  // a value typed is written once, on Enter or leaving the box
    connect(b, &QSpinBox::valueChanged, this, [this, b] { changed(b); });
  }
}

void PlanForm::set_plans(const std::vector<plan::Plan>* plans) {
  plans_ = plans;
  {
    const int keep = plan_pick_->currentIndex();
    const QSignalBlocker quiet(plan_pick_);
    plan_pick_->clear();
    if (plans_)
      for (const auto& p : *plans_) plan_pick_->addItem(q(p.name));
    plan_pick_->setCurrentIndex(keep >= 0 && keep < plan_pick_->count() ? keep : 0);
  }
  fill();
}

int PlanForm::current() const {
  const int i = plan_pick_->currentIndex();
  return plans_ && i >= 0 && i < static_cast<int>(plans_->size()) ? i : -1;
}

void PlanForm::fill() {
  const int i = current();
  std::vector<QWidget*> controls = {gpu_, node_, gpus_, tp_, pp_, dp_, cp_, zero_, offload_, dram_};
  for (const DeviceRow& d : device_rows_) controls.push_back(d.pick), controls.push_back(d.count);
  for (QWidget* w : controls) w->setEnabled(i >= 0);
  const bool none = plans_ && plans_->empty();
  setEnabled(plans_ && !none);
  setTitle(none ? "Plan (the text has none: click a point in the Search tab to add one)"
                : "Plan (edits are written into its text)");
  if (i < 0) return;
  const plan::Plan& p = (*plans_)[static_cast<std::size_t>(i)];
  std::vector<std::unique_ptr<QSignalBlocker>> quiet;
  for (QWidget* w : controls) quiet.push_back(std::make_unique<QSignalBlocker>(w));
  gpu_->setCurrentText(q(p.cluster.gpu.name));
  node_->setCurrentText(q(p.cluster.node.name));
  gpus_->setValue(p.cluster.gpus());
  tp_->setValue(p.parallel.tp);
  pp_->setValue(p.parallel.pp);
  dp_->setValue(p.parallel.dp);
  cp_->setValue(p.parallel.cp);
  zero_->setValue(p.parallel.zero);
  offload_->setCurrentText(plan::to_string(p.offload.preset));
  dram_->setValue(static_cast<int>(std::lround(p.cluster.host.dram_bytes / kGiB)));
  for (const DeviceRow& d : device_rows_)
    plan::for_each_device_kind([&](const auto& kind) {
      if (d.key != std::string_view(kind.key)) return;
      const auto& devices = p.cluster.*kind.in_cluster;
      d.pick->setCurrentIndex(devices.empty() ? 0 : std::max(0, d.pick->findText(q(devices.front().first.name))));
      d.count->setValue(devices.empty() ? 0 : devices.front().second);
    });
}

// A control's new value, as the plan's keys (docs/scenario-format.md).
void PlanForm::changed(QObject* control) {
  const int i = current();
  if (i < 0) return;
  const auto n = [](const QSpinBox* b) { return std::to_string(b->value()); };
  std::vector<io::PlanKey> keys;
  std::string note_text;
  if (control == gpu_)
    keys = {{"cluster.gpu", gpu_->currentText().toStdString()}};
  else if (control == node_)
    keys = {{"cluster.node", node_->currentText().toStdString()}};
  else if (control == gpus_)
    keys = {{"cluster.gpus", n(gpus_)}};
  else if (control == tp_)
    keys = {{"parallel.tp", n(tp_)}};
  else if (control == pp_)
    keys = {{"parallel.pp", n(pp_)}};
  else if (control == dp_)
    keys = {{"parallel.dp", dp_->value() == 0 ? std::string() : n(dp_)}};  // auto: no key
  else if (control == cp_)
    keys = {{"parallel.cp", n(cp_)}};
  else if (control == zero_)
    keys = {{"parallel.zero", n(zero_)}};
  else if (control == offload_) {
    // The preset's placements replace those written by hand; the block's other settings stay
    // where the new placements use them, and what is left out is said.
    std::vector<std::string> dropped;
    if (const auto preset = value_named<plan::OffloadPreset>(offload_->currentText().toStdString()))
      keys = io::preset_changes((*plans_)[static_cast<std::size_t>(i)], *preset, dropped);
    if (!dropped.empty())
      note_text = "left out of the offload block (the new placements have no use for it): " + join(dropped, "; ");
  } else if (control == dram_)
    keys = {{"cluster.dram", n(dram_) + " GiB"}};
  // A device row: its list of one {ITEM: name, count: n} (a name picked with a count of 0 gets 1).
  for (const DeviceRow& d : device_rows_) {
    if (control != d.pick && control != d.count) continue;
    if (control == d.pick && d.pick->currentIndex() > 0 && d.count->value() == 0) {
      const QSignalBlocker quiet(d.count);
      d.count->setValue(1);
    }
    keys = {
        {fmt::format("cluster.{}", d.key),
         d.pick->currentIndex() == 0 || d.count->value() == 0
             ? std::string("[]")
             : fmt::format("[{{{}: {}, count: {}}}]", d.item, d.pick->currentText().toStdString(), d.count->value())}};
  }
  if (keys.empty()) {
    fill();
    return;
  }
  emit keys_changed(i, keys, q(note_text));
}

}  // namespace ftplan::gui
