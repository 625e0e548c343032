#include "plan_form.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>

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
  // A node's devices of one kind: the catalog's names (or none) and how many.
  const auto device_row = [&](const char* name, std::vector<std::string> names, const char* tip, QComboBox*& pick,
                              QSpinBox*& count) {
    names.insert(names.begin(), "(none)");
    pick = combo(name, names);
    count = spin((std::string(name) + "_count").c_str(), 0, 64);
    count->setToolTip(tip);
    auto* row = new QHBoxLayout;
    row->addWidget(pick, 1);
    row->addWidget(new QLabel("×"));
    row->addWidget(count);
    return row;
  };
  auto* drive_row =
      device_row("drive", catalog.drive_names(), "Drives per node (cluster.drives)", drive_, drive_count_);
  auto* expander_row = device_row("expander", catalog.expander_names(),
                                  "CXL memory expanders per node (cluster.expanders)", expander_, expander_count_);
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
  plan_form->addRow("drives per node", drive_row);
  plan_form->addRow("CXL expanders per node", expander_row);
  setEnabled(false);
  connect(plan_pick_, &QComboBox::currentIndexChanged, this, [this] { fill(); });
  for (QComboBox* c : {gpu_, node_, offload_, drive_, expander_})
    connect(c, &QComboBox::activated, this, [this, c] { changed(c); });
  for (QSpinBox* b : {gpus_, tp_, pp_, dp_, cp_, zero_, dram_, drive_count_, expander_count_}) {
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
  for (QWidget* w : std::initializer_list<QWidget*>{gpu_, node_, gpus_, tp_, pp_, dp_, cp_, zero_, offload_, dram_,
                                                    drive_, drive_count_, expander_, expander_count_})
    w->setEnabled(i >= 0);
  const bool none = plans_ && plans_->empty();
  setEnabled(plans_ && !none);
  setTitle(none ? "Plan (the text has none: click a point in the Search tab to add one)"
                : "Plan (edits are written into its text)");
  if (i < 0) return;
  const plan::Plan& p = (*plans_)[static_cast<std::size_t>(i)];
  const QSignalBlocker a(gpu_), b(node_), c(gpus_), d(tp_), e(pp_), f(dp_), g(cp_), h(zero_), k(offload_), l(dram_),
      m(drive_), n(drive_count_), o(expander_), r(expander_count_);
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
  const auto show = [](const auto& devices, QComboBox* pick, QSpinBox* count) {
    pick->setCurrentIndex(devices.empty() ? 0 : std::max(0, pick->findText(q(devices.front().first.name))));
    count->setValue(devices.empty() ? 0 : devices.front().second);
  };
  show(p.cluster.drives, drive_, drive_count_);
  show(p.cluster.expanders, expander_, expander_count_);
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
  // A device row: its list of one {kind: name, count: n} (a name picked with a count of 0 gets 1).
  const auto devices = [&](const char* key, const char* kind, QComboBox* pick, QSpinBox* count) {
    if (control == pick && pick->currentIndex() > 0 && count->value() == 0) {
      const QSignalBlocker quiet(count);
      count->setValue(1);
    }
    return std::vector<io::PlanKey>{
        {key, pick->currentIndex() == 0 || count->value() == 0
                  ? std::string("[]")
                  : fmt::format("[{{{}: {}, count: {}}}]", kind, pick->currentText().toStdString(), count->value())}};
  };
  if (control == drive_ || control == drive_count_)
    keys = devices("cluster.drives", "drive", drive_, drive_count_);
  else if (control == expander_ || control == expander_count_)
    keys = devices("cluster.expanders", "expander", expander_, expander_count_);
  if (keys.empty()) {
    fill();
    return;
  }
  emit keys_changed(i, keys, q(note_text));
}

}  // namespace ftplan::gui
