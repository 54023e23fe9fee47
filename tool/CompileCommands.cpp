//===- CompileCommands.cpp - a database's commands, adjusted --------------===//

#include "CompileCommands.h"
#include "clang/Driver/Driver.h"
#include "clang/Driver/Options.h"
#include "clang/Tooling/ArgumentsAdjusters.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Option/ArgList.h"
#include "llvm/Option/OptTable.h"
#include "llvm/Support/Path.h"

using namespace clang;
using namespace clang::tooling;

namespace ddpify {

bool usesCxx20OrLater(const std::vector<std::string> &Arguments) {
  bool Later = false;
  for (llvm::StringRef Arg : Arguments) {
    // What follows `--` is files, as atCxx20 and the driver read it.
    if (Arg == "--")
      break;
    if (!Arg.consume_front("-std=") && !Arg.consume_front("--std="))
      continue;
    Arg.consume_front("gnu++") || Arg.consume_front("c++");
    Later = Arg == "20" || Arg == "2a" || Arg == "23" || Arg == "2b" ||
            Arg == "26" || Arg == "2c";
  }
  return Later;
}

llvm::opt::InputArgList
driverArguments(const std::vector<std::string> &CommandLine) {
  namespace options = driver::options;
  std::vector<const char *> Argv;
  for (size_t I = 1; I < CommandLine.size(); ++I)
    Argv.push_back(CommandLine[I].c_str());
  bool ClMode = !CommandLine.empty() &&
                driver::IsClangCL(driver::getDriverMode(CommandLine[0], Argv));
  unsigned MissingIndex = 0, MissingCount = 0;
  return driver::getDriverOptTable().ParseArgs(
      Argv, MissingIndex, MissingCount,
      llvm::opt::Visibility(ClMode ? options::CLOption : options::ClangOption));
}

std::vector<std::string>
parseAsTheCompilerDoes(const std::vector<std::string> &CommandLine,
                       std::set<std::string> &Dropped) {
  if (CommandLine.empty())
    return CommandLine;
  namespace options = driver::options;
  llvm::opt::InputArgList Args = driverArguments(CommandLine);
  std::vector<bool> Drop(CommandLine.size(), false);
  for (const llvm::opt::Arg *A : Args) {
    const llvm::opt::Option &Option = A->getOption();
    size_t Index = A->getIndex() + 1;
    if (Index >= CommandLine.size())
      continue;
    llvm::StringRef Spelled = CommandLine[Index];
    // Each of these is one argument: unknown ones, -W..., -pedantic.
    if (Option.getKind() == llvm::opt::Option::UnknownClass ||
        Option.hasFlag(options::Unsupported)) {
      if (Spelled.starts_with("-") && Spelled.size() > 1) {
        Drop[Index] = true;
        Dropped.insert(Spelled.str());
      }
      continue;
    }
    if ((Option.matches(options::OPT_W_Group) &&
         !Spelled.starts_with("-Wno-")) ||
        Option.matches(options::OPT_pedantic_Group))
      Drop[Index] = Spelled.starts_with("-") || Spelled.starts_with("/");
  }
  std::vector<std::string> Kept;
  for (size_t I = 0; I < CommandLine.size(); ++I)
    if (!Drop[I])
      Kept.push_back(CommandLine[I]);
  return getInsertArgumentAdjuster({"-w", "-Wno-c++11-narrowing"},
                                   ArgumentInsertPosition::END)(Kept, "");
}

bool namesCompiler(const CompileCommand &Command) {
  return !Command.CommandLine.empty() && !Command.CommandLine.front().empty() &&
         !llvm::StringRef(Command.CommandLine.front()).starts_with("-");
}

std::vector<std::string> argumentsForParse(const CompileCommand &Command,
                                           const CommandAdditions &Additions,
                                           std::set<std::string> &Dropped) {
  ArgumentsAdjuster Adjust = combineAdjusters(
      combineAdjusters(getInsertArgumentAdjuster(Additions.Before,
                                                 ArgumentInsertPosition::BEGIN),
                       getInsertArgumentAdjuster(Additions.After,
                                                 ArgumentInsertPosition::END)),
      // ClangTool would look for builtin headers next to this binary.
      getInsertArgumentAdjuster({"-resource-dir", Additions.ResourceDir},
                                ArgumentInsertPosition::BEGIN));
  // A migrated file finds <ddp/ddp.h> even when its database predates the
  // runtime (the second run); after every folder of the project's own.
  std::vector<std::string> RuntimeInclude;
  if (!Additions.RuntimeIncludeDir.empty())
    RuntimeInclude = {"-idirafter", Additions.RuntimeIncludeDir};
  return getInsertArgumentAdjuster(RuntimeInclude, ArgumentInsertPosition::END)(
      parseAsTheCompilerDoes(Adjust(Command.CommandLine, Command.Filename),
                             Dropped),
      Command.Filename);
}

std::vector<CompileCommand> atCxx20(std::vector<CompileCommand> Commands,
                                    std::string &From, std::string &To) {
  for (CompileCommand &Command : Commands) {
    std::vector<std::string> &Line = Command.CommandLine;
    if (Line.empty())
      return {};
    std::vector<const char *> Argv;
    for (size_t I = 1; I < Line.size(); ++I)
      Argv.push_back(Line[I].c_str());
    if (driver::IsClangCL(driver::getDriverMode(Line[0], Argv)))
      return {};
    size_t Last = Line.size();
    for (size_t I = 1; I < Line.size(); ++I) {
      llvm::StringRef Arg = Line[I];
      if (Arg == "--")
        break;
      if (Arg.starts_with("-std=") || Arg.starts_with("--std="))
        Last = I;
      // C, or a language given with -x other than C++.
      if ((Arg == "-x" && I + 1 < Line.size() &&
           !llvm::StringRef(Line[I + 1]).starts_with("c++")) ||
          (Arg.starts_with("-x") && Arg.size() > 2 &&
           !Arg.drop_front(2).starts_with("c++")))
        return {};
    }
    bool Gnu = true;
    if (Last < Line.size()) {
      llvm::StringRef Standard = Line[Last];
      From = Standard.str();
      Standard =
          Standard.drop_until([](char C) { return C == '='; }).drop_front();
      if (Standard.consume_front("c++"))
        Gnu = false;
      else if (!Standard.consume_front("gnu++"))
        return {}; // C, or a standard Clang would have refused
      if (!llvm::is_contained({"98", "03", "0x", "11", "1y", "14", "1z", "17"},
                              Standard))
        return {};
    } else {
      llvm::StringRef Extension = llvm::sys::path::extension(Command.Filename);
      if (Extension == ".c" || Extension == ".m" || Extension == ".cu")
        return {};
      From = "Clang's default -std=gnu++17";
    }
    To = Gnu ? "-std=gnu++20" : "-std=c++20";
    if (Last < Line.size()) {
      Line[Last] = To;
      // Earlier ones are overridden anyway.
    } else {
      Line = getInsertArgumentAdjuster({To}, ArgumentInsertPosition::END)(
          Line, Command.Filename);
    }
  }
  return Commands;
}

} // namespace ddpify
