;;; netrun-mode.el --- major mode for netrun's .net scripts  -*- lexical-binding: t; -*-

;; A major mode for the model scripts of netrun (netrun-lang(5)):
;; highlighting, `#' comments, the two-space indentation of `netrun fmt',
;; and `netrun lsp' through eglot (Emacs 29's built-in LSP client, or the
;; eglot package on older Emacs).

;;; Code:

(defgroup netrun nil "netrun model scripts." :group 'languages)

(defcustom netrun-program "netrun"
  "The netrun executable, for `netrun lsp'."
  :type 'string)

(defcustom netrun-indent-offset 2
  "Spaces per block level (netrun fmt uses 2)."
  :type 'integer)

(defconst netrun-font-lock-keywords
  `((,(regexp-opt '("input" "param" "state" "def" "op" "grad" "return" "while" "if" "else"
                    "import" "load" "and" "or" "not")
                  'symbols)
     . font-lock-keyword-face)
    (,(regexp-opt '("true" "false") 'symbols) . font-lock-constant-face)
    (,(regexp-opt '("f32" "f64" "i64" "bool") 'symbols) . font-lock-type-face)
    ("\\_<\\(?:def\\|op\\)\\s-+\\([A-Za-z_][A-Za-z0-9_]*\\)" 1 font-lock-function-name-face)
    ("^\\s-*\\([A-Za-z_][A-Za-z0-9_]*\\)\\s-*{" 1 font-lock-builtin-face)
    ("\\_<[A-Za-z_][A-Za-z0-9_]*@GRAD\\_>" . font-lock-variable-name-face)
    ("\\_<[0-9]+\\(?:\\.[0-9]+\\)?\\(?:[eE][-+]?[0-9]+\\)?\\_>" . font-lock-constant-face))
  "Highlighting for `netrun-mode'.")

(defvar netrun-mode-syntax-table
  (let ((st (make-syntax-table)))
    (modify-syntax-entry ?# "<" st)
    (modify-syntax-entry ?\n ">" st)
    (modify-syntax-entry ?_ "_" st)
    (modify-syntax-entry ?\" "\"" st)
    (modify-syntax-entry ?' "." st)
    st)
  "Syntax table for `netrun-mode'.")

(defun netrun-indent-line ()
  "Indent the current line by the depth of the brackets around it."
  (interactive)
  (let* ((depth (save-excursion (car (syntax-ppss (line-beginning-position)))))
         (closing (save-excursion (back-to-indentation) (looking-at "[])}]")))
         (col (* netrun-indent-offset (max 0 (- depth (if closing 1 0))))))
    (if (<= (current-column) (current-indentation))
        (indent-line-to col)
      (save-excursion (indent-line-to col)))))

;;;###autoload
(define-derived-mode netrun-mode prog-mode "netrun"
  "Major mode for netrun's .net model scripts."
  (setq-local comment-start "# ")
  (setq-local comment-start-skip "#+\\s-*")
  (setq-local font-lock-defaults '(netrun-font-lock-keywords))
  (setq-local indent-line-function #'netrun-indent-line)
  (setq-local indent-tabs-mode nil)
  (setq-local tab-width 8))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.net\\'" . netrun-mode))

(defun netrun-lsp-command (&optional _interactive)
  "The command eglot starts for a netrun buffer: `netrun lsp --stdio'.
A function, so a `netrun-program' set after this file loads is honoured."
  (list netrun-program "lsp" "--stdio"))

(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs '(netrun-mode . netrun-lsp-command)))

(provide 'netrun-mode)
;;; netrun-mode.el ends here
